"""How many GPUs one replica asks Ray for, read from the repository's instance groups."""

from __future__ import annotations

from collections.abc import Sequence

from naiad.backend.helpers import model_config_pb2 as pb
from naiad.config import parse_config_text
from naiad.repository import LocalRepository, is_remote

__all__ = ["gpus_per_replica"]


def gpus_per_replica(model_repositories: Sequence[str]) -> int:
    """The GPUs a replica needs so that every KIND_GPU instance group of every model in the
    local repositories can be placed (every model, not only those loaded at start-up:
    `poll` mode may load the others later).

    Ray shows a replica the GPUs it was given as ordinals 0..n-1 (CUDA_VISIBLE_DEVICES), so a
    group that lists `gpus: [0, 2]` needs three, and a KIND_GPU group without a list needs
    one (naiad puts `count` instances on every GPU it sees). KIND_AUTO and KIND_CPU groups
    need none; remote repositories (s3://, gs://, as://) are not read: pass `num_gpus` to
    `build_app` for those, or to reserve GPUs for KIND_AUTO models.
    """
    needed = 0
    for location in model_repositories:
        if is_remote(location):
            continue
        for name, source in LocalRepository(location).list_models().items():
            text = source.config_text()
            if text is None:
                continue
            for group in parse_config_text(text, name).instance_group:
                if group.kind == pb.ModelInstanceGroup.KIND_GPU:
                    needed = max(needed, max(group.gpus) + 1 if group.gpus else 1)
    return needed
