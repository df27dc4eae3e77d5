"""Optimization profiles: which ones an instance may use (`instance_group.profile`), and
which one fits a batch's input shapes."""

from __future__ import annotations

from naiad.backend import ConfigError, ModelConfig, NaiadError

from .engine_description import EngineDescription

__all__ = ["allowed_profiles", "choose_profile"]


def allowed_profiles(config: ModelConfig, group_name: str, num_profiles: int, model: str) -> list[int]:
    """The profile indexes listed by the instance's group (`profile: ["0", "2"]`), or every
    profile when it lists none."""
    for index, group in enumerate(config.proto.instance_group):
        if (group.name or f"{config.name}_{index}") != group_name or not group.profile:
            continue
        chosen: list[int] = []
        for text in group.profile:
            try:
                value = int(text)
            except ValueError:
                value = -1
            if not 0 <= value < num_profiles:
                raise ConfigError(
                    model,
                    f"instance_group[{index}].profile: '{text}' is not a profile of the engine "
                    f"(it has {num_profiles}: 0..{num_profiles - 1})",
                )
            chosen.append(value)
        return chosen
    return list(range(num_profiles))


def choose_profile(engine: EngineDescription, allowed: list[int], shapes: dict[str, tuple[int, ...]]) -> int:
    """The first allowed profile whose ranges admit every input shape; INVALID_ARG naming
    the shapes and ranges when none does."""
    for index in allowed:
        if all(
            not tensor.profiles or index >= len(tensor.profiles) or tensor.profiles[index].admits(shapes[tensor.name])
            for tensor in engine.inputs
            if tensor.name in shapes and not tensor.is_shape_tensor
        ):
            return index
    ranges = "; ".join(
        f"profile {i}: "
        + ", ".join(
            f"'{t.name}' {list(t.profiles[i].min)}..{list(t.profiles[i].max)}"
            for t in engine.inputs
            if t.profiles and i < len(t.profiles)
        )
        for i in allowed
    )
    given = ", ".join(f"'{name}' {list(shape)}" for name, shape in shapes.items())
    raise NaiadError.invalid(f"input shapes {given} fit none of the engine's optimization profiles ({ranges})")
