"""Checks a request against its model's config before anything runs.

Shared by every frontend through `Server.infer`, so HTTP, gRPC and in-process callers get
the same messages. On success the request's input data is in the shape the model
expects (config `reshape` applied) and its batch size is returned.
"""

from __future__ import annotations

from .classification import classification_count
from .config.model_config import ModelConfig, TensorSpec
from .config.request_plan import RequestPlan
from .errors import NaiadError
from .inference import InferenceRequest
from .tensor import Tensor

__all__ = ["validate_request", "shape_matches"]


def shape_matches(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether a concrete shape fits config dims (-1 matches any size)."""
    if shape == dims:  # the common case: fixed dims, a request that fits them
        return True
    return len(shape) == len(dims) and all(d == -1 or d == s for s, d in zip(shape, dims))


def validate_request(request: InferenceRequest, config: ModelConfig, version: str) -> int:
    """Raise INVALID_ARG naming the fault, or return the request's batch size (1 for models
    without batching). Messages are Triton's words, which clients match on, with
    Triton's `[request id: ...]` prefix where Triton puts one."""
    plan = config.derived(RequestPlan.of)
    model = plan.model
    label = f"[request id: {request.id or '<id_unknown>'}] "
    _check_input_count(request, plan, label)  # after it, a missing input is an unexpected one
    batch_size: int | None = None
    batching = plan.batching
    for tensor in request.inputs:
        spec = plan.inputs.get(tensor.name)
        if spec is None:
            raise NaiadError.invalid(
                f"unexpected inference input '{tensor.name}' for {model}; it expects "
                + ", ".join(f"'{name}'" for name in plan.input_names)
            )
        if tensor.datatype != spec.datatype:
            raise NaiadError.invalid(
                f"{label}inference input '{tensor.name}' data-type is '{tensor.datatype}', but {model} expects "
                f"'{spec.datatype}'"
            )
        size = _check_shape(tensor, spec, plan, label)
        if batching and not spec.is_shape_tensor:
            if batch_size is None:
                batch_size = size
            elif size != batch_size:
                raise NaiadError.invalid(
                    f"{label}input '{tensor.name}' batch size does not match other inputs for '{plan.name}' "
                    f"({size} against {batch_size})"
                )
        if spec.reshape is not None:
            _apply_reshape(tensor, spec, batching)
    for output in request.outputs:
        if output.name not in plan.outputs:
            raise NaiadError.invalid(f"unexpected inference output '{output.name}' for {model}")
        classification_count(output)
    return batch_size if batch_size is not None else 1


def _check_input_count(request: InferenceRequest, plan: RequestPlan, label: str) -> None:
    """Triton's first check: a request carries every required input and no more inputs
    than the model has (implicit-state and control inputs come from the sequence batcher)."""
    given = [t.name for t in request.inputs]
    if tuple(given) == plan.input_names:
        return  # the common case: every input, once each, in the config's order
    names = set(given)
    if len(names) != len(given):
        for index, name in enumerate(given):
            if name in given[:index]:
                raise NaiadError.invalid(
                    f"input '{name}' already exists in request (it appears more than once in the request for model "
                    f"'{plan.name}')"
                )
    missing = [name for name in plan.required_inputs if name not in names]
    if missing and all(name in plan.sequence_provided for name in missing):
        return
    # Within the count, Triton goes on to name an unexpected input first.
    count = len(plan.input_names)
    if len(plan.required_inputs) <= len(given) <= count and (not missing or not names <= plan.inputs.keys()):
        return
    if len(plan.required_inputs) == count:
        expected = f"expected {count} inputs"
    else:
        expected = f"expected number of inputs between {len(plan.required_inputs)} and {count}"
    raise NaiadError.invalid(
        f"{label}{expected} but got {len(given)} inputs for model '{plan.name}'. Got input(s) {_names(given)}, "
        f"but missing required input(s) {_names(missing)}. Please provide all required input(s)."
    )


def _names(names: list[str]) -> str:
    return "[" + ",".join(f"'{name}'" for name in names) + "]"


def _dims(dims: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


# Triton's hint after a shape error of a batching model.
_BATCH_DIM_NOTE = (
    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended "
    "to each input shape. If you want to specify the full shape including the batch dim in your input dims "
    "config, try setting max_batch_size to zero. See the model configuration docs for more info on "
    "max_batch_size."
)


def _check_shape(tensor: Tensor, spec: TensorSpec, plan: RequestPlan, label: str) -> int:
    model = plan.model
    shape = tuple(tensor.shape)
    if tuple(tensor.data.shape) != shape:
        raise NaiadError.invalid(
            f"input '{tensor.name}': data holds shape {list(tensor.data.shape)}, the request declares {list(shape)}"
        )
    if plan.batching and not spec.is_shape_tensor:
        if not shape or not shape_matches(shape[1:], spec.dims):
            raise NaiadError.invalid(
                f"{label}unexpected shape for input '{tensor.name}' for {model}. Expected "
                f"{_dims((-1, *spec.dims))}, got {_dims(shape)}.{_BATCH_DIM_NOTE}"
            )
        batch = shape[0]
        if batch < 1 or batch > plan.max_batch_size:
            raise NaiadError.invalid(
                f"{label}inference request batch-size must be <= {plan.max_batch_size} for '{plan.name}' "
                f"(input '{tensor.name}' has batch size {batch})"
            )
        return batch
    if not shape_matches(shape, spec.dims):
        raise NaiadError.invalid(
            f"{label}unexpected shape for input '{tensor.name}' for {model}. Expected {_dims(spec.dims)}, "
            f"got {_dims(shape)}. "
        )
    return 1


def _apply_reshape(tensor: Tensor, spec: TensorSpec, batching: bool) -> None:
    assert spec.reshape is not None
    target = list(spec.reshape)
    if batching:
        target = [tensor.shape[0]] + target
    if target.count(-1) > 1:
        # Variable dims keep their sizes in order: take them from the request's shape.
        sizes = iter(s for s, d in zip(tensor.shape[1 if batching else 0 :], spec.dims) if d == -1)
        target = [next(sizes) if d == -1 else d for d in target]
    tensor.data = tensor.data.reshape(target)
    tensor.shape = tuple(tensor.data.shape)
