"""The generate extension's JSON mapping (`/generate`, `/generate_stream`), as Triton maps it.

A request is one flat JSON object. Each top-level key that names a model input becomes that
input: a scalar or a list, converted to the input's datatype and given the input's shape
(fixed dimensions divide the element count, the innermost variable dimension takes what
remains, other variable dimensions are 1). Every other key becomes a request parameter
(string, integer, boolean or number). The optional `parameters` object is mapped the same
way, one level down. An answer carries `model_name`, `model_version`, the response's
parameters and every output as a top-level key: one element as a scalar, more as a flat list.

`naiad-openai` builds its requests with `generate_request` too, so both follow one mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...config.model_config import ModelConfig, TensorSpec
from ...errors import NaiadError, shown
from ...inference import InferenceRequest, InferenceResponse
from ...tensor import Tensor
from .json_tensors import array_from_json, json_from_tensor

__all__ = ["generate_request", "generate_answer", "input_shape"]

_PARAMETERS = "parameters"


def generate_request(document: Mapping[str, Any], config: ModelConfig, model_version: str = "") -> InferenceRequest:
    """The inference request a generate body asks for; INVALID_ARG naming the key at fault."""
    request = InferenceRequest(config.name, [], model_version)
    if "id" in document:
        if not isinstance(document["id"], str):
            raise NaiadError.invalid(f"Unable to parse 'id': it must be a string, got {shown(document['id'])}")
        request.id = document["id"]
    for key, value in document.items():
        if key == _PARAMETERS:
            if key in config.input_by_name:
                raise NaiadError.invalid(f"Keyword '{key}' for nested schema also given as input tensor name")
            if not isinstance(value, dict):
                raise NaiadError.invalid(f"Expected JSON object for keyword: '{key}'")
            for nested_key, nested_value in value.items():
                _map_key(request, config, nested_key, nested_value)
        else:
            _map_key(request, config, key, value)
    return request


def _map_key(request: InferenceRequest, config: ModelConfig, key: str, value: Any) -> None:
    spec = config.input_by_name.get(key)
    if spec is None:
        # Triton's parameter types; anything else (lists, objects, null) has no parameter form.
        if not isinstance(value, (str, int, float)):
            raise NaiadError.invalid(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'."
            )
        request.parameters[key] = value
        return
    if request.input(key) is not None:
        raise NaiadError.invalid(f"input '{key}' is given twice (at the top level and in 'parameters')")
    count = len(value) if isinstance(value, list) else 1
    shape = input_shape(spec, config.max_batch_size, count)
    request.inputs.append(Tensor(key, spec.datatype, shape, array_from_json(key, spec.datatype, shape, value)))


def input_shape(spec: TensorSpec, max_batch_size: int, count: int) -> tuple[int, ...]:
    """The shape `count` elements take in input `spec` (its dims, with the batch dimension
    first for a batching model), as Triton's generate endpoint fills it."""
    dims = ([-1] if max_batch_size > 0 else []) + list(spec.dims)
    remaining = count
    for dim in dims:
        if dim != -1:
            if dim == 0 or remaining % dim:
                raise NaiadError.invalid(f"The schema can not convert input '{spec.name}' to tensor with proper shape")
            remaining //= dim
    shape: list[int] = []
    for dim in reversed(dims):
        if dim == -1:
            shape.append(remaining)
            remaining = 1
        else:
            shape.append(dim)
    if remaining != 1:
        raise NaiadError.invalid(
            f"The schema can not convert input '{spec.name}' to tensor with proper shape "
            f"({count} element(s) given, dims {list(spec.dims)})"
        )
    return tuple(reversed(shape))


def generate_answer(response: InferenceResponse) -> dict[str, Any]:
    """The JSON object of one generate response."""
    answer: dict[str, Any] = {}
    if response.id:
        answer["id"] = response.id
    answer["model_name"] = response.model_name
    answer["model_version"] = response.model_version
    for key, value in response.parameters.items():
        if isinstance(value, (str, int, float)):
            answer[key] = value
    for tensor in response.outputs:
        data = json_from_tensor(tensor)
        if len(data) == 1:
            # One element travels as a scalar; numpy's become Python numbers for orjson.
            data = data[0].item() if hasattr(data[0], "item") else data[0]
        answer[tensor.name] = data
    return answer
