"""Checks a config tensor's shape against the shape a model file declares, for backends
that read their model's signature at load (the config may not contradict the model)."""

from __future__ import annotations

from ..config.model_config import ConfigError, TensorSpec

__all__ = ["check_model_shape"]


def check_model_shape(model: str, where: str, spec: TensorSpec, actual: list[int], batched: bool, source: str) -> None:
    """Raise ConfigError naming the tensor (`where`, e.g. "input 'x' (input[0]") when the
    config's dims (its `reshape` if set, with a leading -1 when `batched`) cannot describe
    `actual`, the model's shape with -1 for variable dimensions. `source` names the model
    file in the message ("SavedModel", "engine", ...)."""
    if spec.allow_ragged_batch:
        # The requests' elements reach the model concatenated into one flat tensor (as in
        # Triton's framework backends), whatever the config's dims.
        if actual != [-1]:
            raise ConfigError(
                model,
                f"{where}.dims): allow_ragged_batch needs the {source} to take the input as a flat "
                f"tensor of shape [-1], it has {actual}",
            )
        return
    expected = ([-1] if batched else []) + list(spec.reshape if spec.reshape is not None else spec.dims)
    if len(actual) != len(expected):
        hint = " (the batch dimension counts when max_batch_size > 0)" if batched else ""
        raise ConfigError(
            model, f"{where}.dims): the config describes shape {expected}{hint}, the {source} has {actual}"
        )
    if batched and actual[0] != -1:
        raise ConfigError(
            model,
            f"{where}.dims): max_batch_size > 0 stacks requests along the first dimension, but the "
            f"{source} fixes it at {actual[0]} (shape {actual}); set max_batch_size: 0",
        )
    for position, (want, have) in enumerate(zip(expected, actual)):
        if want != -1 and have != -1 and want != have:
            raise ConfigError(
                model,
                f"{where}.dims): dimension {position} is {want} in the config and {have} in the {source} "
                f"(config shape {expected}, {source} shape {actual})",
            )
