"""Checks a request against its model's config before anything runs.

Shared by every frontend through `Server.infer`, so HTTP, gRPC and in-process callers get
the same messages. On success the request's input data is in the shape the model
expects (config `reshape` applied) and its batch size is returned.
"""

from __future__ import annotations

from .classification import classification_count
from .errors import NaiadError
from .inference import InferenceRequest
from .model_config import ModelConfig, TensorSpec
from .tensor import Tensor

__all__ = ["validate_request", "shape_matches"]


def shape_matches(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether a concrete shape fits config dims (-1 matches any size)."""
    return len(shape) == len(dims) and all(d == -1 or d == s for s, d in zip(shape, dims))


def validate_request(request: InferenceRequest, config: ModelConfig, version: str) -> int:
    """Raise INVALID_ARG naming the fault, or return the request's batch size (1 for models
    without batching)."""
    model = f"model '{config.name}'"
    seen: set[str] = set()
    batch_size: int | None = None
    batching = config.max_batch_size > 0
    for tensor in request.inputs:
        spec = config.input_by_name.get(tensor.name)
        if spec is None:
            raise NaiadError.invalid(
                f"unexpected inference input '{tensor.name}' for {model}; it expects "
                + ", ".join(f"'{s.name}'" for s in config.inputs)
            )
        if tensor.name in seen:
            raise NaiadError.invalid(f"input '{tensor.name}' appears more than once in the request for {model}")
        seen.add(tensor.name)
        if tensor.datatype != spec.datatype:
            raise NaiadError.invalid(
                f"inference input '{tensor.name}' data-type is '{tensor.datatype}', but {model} expects '{spec.datatype}'"
            )
        size = _check_shape(tensor, spec, config, model)
        if batching and not spec.is_shape_tensor:
            if batch_size is None:
                batch_size = size
            elif size != batch_size:
                raise NaiadError.invalid(
                    f"inputs of one request must share the batch size: '{tensor.name}' has {size}, "
                    f"an earlier input has {batch_size} ({model})"
                )
        if spec.reshape is not None:
            _apply_reshape(tensor, spec, batching)
    missing = [s.name for s in config.inputs if not s.optional and s.name not in seen]
    if missing and not _state_inputs_cover(config, missing):
        raise NaiadError.invalid(
            f"{model} expects input(s) " + ", ".join(f"'{m}'" for m in missing)
            + " that the request does not carry"
        )
    for output in request.outputs:
        if output.name not in config.output_by_name:
            raise NaiadError.invalid(f"unexpected inference output '{output.name}' for {model}")
        classification_count(output)
    return batch_size if batch_size is not None else 1


def _check_shape(tensor: Tensor, spec: TensorSpec, config: ModelConfig, model: str) -> int:
    shape = tuple(tensor.shape)
    if tuple(tensor.data.shape) != shape:
        raise NaiadError.invalid(
            f"input '{tensor.name}': data holds shape {list(tensor.data.shape)}, the request declares {list(shape)}"
        )
    if config.max_batch_size > 0 and not spec.is_shape_tensor:
        if not shape:
            raise NaiadError.invalid(
                f"input '{tensor.name}' has no batch dimension; {model} supports batching, "
                f"so its shape must be [batch] + {list(spec.dims)}"
            )
        batch = shape[0]
        if batch < 1 or batch > config.max_batch_size:
            raise NaiadError.invalid(
                f"inference request batch-size must be <= {config.max_batch_size} for {model}, "
                f"input '{tensor.name}' has batch size {batch}"
            )
        if not shape_matches(shape[1:], spec.dims):
            raise NaiadError.invalid(
                f"unexpected shape for input '{tensor.name}' for {model}. Expected "
                f"{[-1] + list(spec.dims)}, got {list(shape)}"
            )
        return batch
    if not shape_matches(shape, spec.dims):
        raise NaiadError.invalid(
            f"unexpected shape for input '{tensor.name}' for {model}. Expected {list(spec.dims)}, got {list(shape)}"
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


def _state_inputs_cover(config: ModelConfig, missing: list[str]) -> bool:
    """Implicit-state and control inputs are filled by the sequence batcher, not the client."""
    sequence = config.proto.sequence_batching
    provided = {state.input_name for state in sequence.state}
    provided.update(control.name for control in sequence.control_input)
    return all(name in provided for name in missing)
