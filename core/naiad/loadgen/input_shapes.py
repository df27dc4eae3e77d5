"""The shape each input is sent with: the model's dims, with `--shape NAME:DIMS` filling
its variable dimensions (perf_analyzer's rule: DIMS leave out the batch dimension)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .load_error import LoadError
from .model_info import ModelInfo, TensorInfo

__all__ = ["input_dims", "parse_shape_flag"]


def parse_shape_flag(text: str) -> tuple[str, tuple[int, ...]]:
    """`NAME:D1,D2,...` (perf_analyzer's --shape) into (NAME, dims)."""
    name, colon, dims = text.rpartition(":")
    if not colon or not name or not dims:
        raise LoadError(f"--shape '{text}': expected NAME:DIMS, e.g. INPUT0:1,16")
    try:
        values = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise LoadError(f"--shape '{text}': the dims must be whole numbers separated by commas") from None
    if any(d < 1 for d in values):
        raise LoadError(f"--shape '{text}': every dimension must be 1 or more")
    return name, values


def input_dims(model: ModelInfo, shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """Every input's dims without the batch dimension; LoadError naming the input and both
    shapes when a --shape does not fit the model, or a variable dimension is left unset."""
    names = {tensor.name for tensor in model.inputs}
    for name in shapes:
        if name not in names:
            raise LoadError(
                f"--shape {name}: model '{model.name}' has no input '{name}' (its inputs: {', '.join(sorted(names))})"
            )
    return {tensor.name: _dims_of(model, tensor, shapes.get(tensor.name)) for tensor in model.inputs}


def _dims_of(model: ModelInfo, tensor: TensorInfo, given: Sequence[int] | None) -> tuple[int, ...]:
    model_dims = _spelled(tensor.dims)
    if given is None:
        if any(d < 0 for d in tensor.dims):
            raise LoadError(
                f"input '{tensor.name}' of model '{model.name}' has a variable dimension ({model_dims}): "
                f"give its shape with --shape {tensor.name}:DIMS"
            )
        return tensor.dims
    dims = tuple(int(d) for d in given)
    fits = len(dims) == len(tensor.dims) and all(m < 0 or m == d for m, d in zip(tensor.dims, dims))
    if not fits:
        batch = " (without the batch dimension)" if model.max_batch_size > 0 else ""
        raise LoadError(
            f"--shape {tensor.name}:{','.join(map(str, dims))} does not fit model '{model.name}': "
            f"input '{tensor.name}' has shape {model_dims}{batch}"
        )
    return dims


def _spelled(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"
