"""config.pbtxt fields naiad parses but does not act on.

A Triton repository loads unchanged, so these fields are accepted; a model that sets one
gets a warning at load naming the field, so a user never mistakes silence for support.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protos import model_config_pb2 as pb

__all__ = ["UNACTED_FIELDS", "unacted_fields"]

_Check = Callable[[pb.ModelConfig], bool]


def _any_group(test: Callable[[pb.ModelInstanceGroup], bool]) -> _Check:
    return lambda proto: any(test(group) for group in proto.instance_group)


# (field path as written in config.pbtxt, is it set, why it has no effect)
UNACTED_FIELDS: tuple[tuple[str, _Check, str], ...] = (
    ("instance_group.passive", _any_group(lambda g: g.passive), "naiad schedules requests on every instance"),
    (
        "instance_group.secondary_devices",
        _any_group(lambda g: len(g.secondary_devices) > 0),
        "naiad places instances on their GPUs only",
    ),
    ("instance_group.host_policy", _any_group(lambda g: bool(g.host_policy)), "naiad has no host policies"),
    (
        "sequence_batching.iterative_sequence",
        lambda p: p.sequence_batching.iterative_sequence,
        "naiad has no iterative sequences yet",
    ),
    ("batch_output", lambda p: len(p.batch_output) > 0, "naiad does not scatter batch outputs"),
    ("model_operations", lambda p: p.HasField("model_operations"), "naiad loads no custom operation libraries"),
    ("model_repository_agents", lambda p: len(p.model_repository_agents.agents) > 0, "naiad has no repository agents"),
    ("metric_tags", lambda p: bool(p.metric_tags), "naiad labels metrics by model and version only"),
    (
        "optimization.eager_batching",
        lambda p: p.optimization.eager_batching,
        "naiad's dynamic batcher forms batches as the queue allows",
    ),
    (
        "optimization.input_pinned_memory",
        lambda p: p.optimization.HasField("input_pinned_memory"),
        "naiad keeps no pinned-memory pool",
    ),
    (
        "optimization.output_pinned_memory",
        lambda p: p.optimization.HasField("output_pinned_memory"),
        "naiad keeps no pinned-memory pool",
    ),
    (
        "optimization.gather_kernel_buffer_threshold",
        lambda p: p.optimization.gather_kernel_buffer_threshold > 0,
        "naiad gathers inputs with numpy",
    ),
)


def unacted_fields(proto: pb.ModelConfig) -> list[tuple[str, str]]:
    """(field, why) for each field the config sets that naiad does not act on."""
    return [(field, why) for field, is_set, why in UNACTED_FIELDS if is_set(proto)]
