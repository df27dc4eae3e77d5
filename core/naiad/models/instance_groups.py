"""Expands a config's instance groups into the instances to create."""

from __future__ import annotations

from ..backend.abi import InstanceContext
from ..config.model_config import MAX_INSTANCES, ConfigError, ModelConfig
from ..devices import gpu_ids
from ..protos import model_config_pb2 as pb

__all__ = ["expand_instance_groups"]


def expand_instance_groups(config: ModelConfig, gpus: list[int] | None = None) -> list[InstanceContext]:
    """One InstanceContext per instance: `count` per group, times each listed GPU for GPU
    groups. KIND_AUTO is GPU when the machine has one, else CPU; KIND_GPU without a GPU
    is a load error. No group at all means one instance."""
    available = gpu_ids() if gpus is None else gpus
    groups = list(config.proto.instance_group) or [pb.ModelInstanceGroup(count=1)]
    planned: list[tuple[str, str, list[int], int]] = []
    for index, group in enumerate(groups):
        name = group.name or f"{config.name}_{index}"
        count = group.count if group.count > 0 else 1
        kind = pb.ModelInstanceGroup.Kind.Name(group.kind).removeprefix("KIND_")
        if kind == "AUTO":
            kind = "GPU" if available else "CPU"
        if kind == "GPU":
            if not available:
                raise ConfigError(
                    config.name,
                    f"instance_group[{index}].kind: KIND_GPU asks for a GPU and this machine has none "
                    "(use KIND_CPU or KIND_AUTO)",
                )
            devices = list(group.gpus) or available
            unknown = [g for g in devices if g not in available]
            if unknown:
                raise ConfigError(
                    config.name, f"instance_group[{index}].gpus: GPU(s) {unknown} do not exist (available: {available})"
                )
        else:
            devices = [0]
        planned.append((name, kind, devices, count))
    total = sum(len(devices) * count for _, _, devices, count in planned)
    if total > MAX_INSTANCES:
        # validate_config checked the config's own total; a GPU group without `gpus` takes
        # every GPU of the machine.
        raise ConfigError(
            config.name, f"instance_group: {total} instances in all; a model version may have at most {MAX_INSTANCES}"
        )
    contexts: list[InstanceContext] = []
    numbered: dict[str, int] = {}
    for name, kind, devices, count in planned:
        for device in devices:
            for _ in range(count):
                # Instances are numbered within their group name (groups may share one).
                number = numbered.get(name, 0)
                numbered[name] = number + 1
                contexts.append(
                    InstanceContext(
                        name=f"{name}_{number}",
                        kind=kind,
                        device_id=device if kind == "GPU" else 0,
                        index=len(contexts),
                        group_name=name,
                    )
                )
    return contexts
