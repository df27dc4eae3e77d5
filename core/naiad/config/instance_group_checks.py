"""The rules Triton applies to a model's instance groups: which kinds may name GPUs, and
which GPU ids exist.

Triton checks them when it creates a model version, before the backend opens the model
file; naiad does the same. Groups are named as Triton names them (`<model>_<index>` when
unnamed) and KIND_AUTO is resolved as Triton resolves it, so the messages name the group a
user sees in the loaded config. The wording is Triton's.
"""

from __future__ import annotations

from ..protos import model_config_pb2 as pb
from .config_error import ConfigError

__all__ = ["check_instance_groups", "MIN_COMPUTE_CAPABILITY"]

# Triton's default minimum CUDA compute capability, as its messages print it.
MIN_COMPUTE_CAPABILITY = 6.0

_Group = pb.ModelInstanceGroup


def check_instance_groups(proto: pb.ModelConfig, model: str, gpus: list[int]) -> None:
    """Raise ConfigError for the first instance group Triton would refuse on a machine
    whose usable GPUs are `gpus`."""
    if proto.HasField("ensemble_scheduling"):
        return
    name = proto.name or model
    for index, group in enumerate(proto.instance_group):
        label = f"instance group {group.name or f'{name}_{index}'} of model {name}"
        kind = _resolved_kind(group, gpus)
        if kind in (_Group.KIND_MODEL, _Group.KIND_CPU) and group.gpus:
            raise ConfigError(model, f"{label} has kind {_Group.Kind.Name(kind)} but specifies one or more GPUs")
        if kind == _Group.KIND_GPU:
            if not group.gpus and not gpus:
                raise ConfigError(model, f"{label} has kind KIND_GPU but no GPUs are available")
            for gpu in group.gpus:
                if gpu not in gpus:
                    raise ConfigError(
                        model,
                        f"{label} specifies invalid or unsupported gpu id {gpu}. GPUs with at least the minimum "
                        f"required CUDA compute compatibility of {MIN_COMPUTE_CAPABILITY:f} are: "
                        + ", ".join(str(g) for g in sorted(gpus)),
                    )
        if group.profile and proto.platform != "tensorrt_plan":
            # Triton's text runs the platform into "specifies"; it is kept so matches still work.
            raise ConfigError(
                model,
                f"{label} and platform {proto.platform}specifies profile field which is only supported for "
                "TensorRT models",
            )


def _resolved_kind(group: pb.ModelInstanceGroup, gpus: list[int]) -> int:
    """KIND_AUTO is a GPU group when the machine has GPUs and has every one it lists."""
    if group.kind != _Group.KIND_AUTO:
        return group.kind
    if not gpus or any(gpu not in gpus for gpu in group.gpus):
        return _Group.KIND_CPU
    return _Group.KIND_GPU
