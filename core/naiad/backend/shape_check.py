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
    fits = len(actual) == len(expected) and all(
        want == have or -1 in (want, have) for want, have in zip(expected, actual)
    )
    # A fixed first dimension cannot hold a batch of any size.
    if fits and not (batched and actual[0] != -1):
        return
    # Triton's words (its framework backends'), so scripts that match on them still work.
    if batched:
        specified = (
            f"{len(expected)} dimensions (an initial batch dimension because max_batch_size > 0 followed by the "
            f"explicit tensor shape, making complete shape {_shape(expected)})"
        )
    else:
        specified = f"{len(expected)} dimensions (shape {_shape(expected)})"
    hint = f"; the {source} fixes the batch dimension: set max_batch_size: 0" if fits else ""
    raise ConfigError(
        model,
        f"model '{model}', tensor '{spec.name}': the model expects {len(actual)} dimensions (shape "
        f"{_shape(actual)}) but the model configuration specifies {specified}{hint}",
    )


def _shape(dims: list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"
