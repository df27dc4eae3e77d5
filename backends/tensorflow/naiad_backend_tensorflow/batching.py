"""Runs a batch of requests on a framework call: stacks inputs along axis 0, runs once,
splits outputs back per request.

Kept minimal and private to this backend for now; the core is growing an opt-in batching
helper (naiad.batching) and this module should give way to it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from naiad import InferenceRequest, InferenceResponse, ModelConfig, NaiadError, Tensor

__all__ = ["RunFunction", "execute_batch"]

# (inputs by config name, output names) -> outputs by name
RunFunction = Callable[[dict[str, np.ndarray], list[str]], dict[str, np.ndarray]]
ErrorFunction = Callable[[Exception], NaiadError]


def execute_batch(
    requests: list[InferenceRequest], config: ModelConfig, run: RunFunction, error_of: ErrorFunction
) -> list[InferenceResponse]:
    """One response per request. A batching model runs stackable requests (same inputs,
    same non-batch shapes) as one call; when that call fails, each request runs alone so
    one bad request does not fail its neighbours."""
    if config.max_batch_size > 0 and len(requests) > 1:
        stacked = _stack(requests, config)
        if stacked is not None:
            inputs, sizes = stacked
            wanted = _union_of_outputs(requests, config)
            try:
                results = run(inputs, wanted)
            except Exception:  # noqa: BLE001 - retried per request below, which reports it
                results = None
            if results is not None and all(
                results[name].ndim >= 1 and results[name].shape[0] == sum(sizes) for name in wanted
            ):
                return _split(requests, results, sizes, config)
    return [_run_one(request, config, run, error_of) for request in requests]


def _requested(request: InferenceRequest, config: ModelConfig) -> list[str]:
    if request.outputs:
        return [o.name for o in request.outputs]
    return [spec.name for spec in config.outputs]


def _union_of_outputs(requests: list[InferenceRequest], config: ModelConfig) -> list[str]:
    wanted = {name for request in requests for name in _requested(request, config)}
    return [spec.name for spec in config.outputs if spec.name in wanted]


def _stack(requests: list[InferenceRequest], config: ModelConfig) -> tuple[dict[str, np.ndarray], list[int]] | None:
    names = [t.name for t in requests[0].inputs]
    if any(config.input_by_name[name].is_shape_tensor for name in names):
        return None  # shape tensors hold shape values, not batch rows
    first = {t.name: t for t in requests[0].inputs}
    for request in requests[1:]:
        if sorted(t.name for t in request.inputs) != sorted(names):
            return None
        for tensor in request.inputs:
            if tensor.data.shape[1:] != first[tensor.name].data.shape[1:]:
                return None
    inputs = {name: np.concatenate([r.input(name).data for r in requests], axis=0) for name in names}
    sizes = [int(requests[i].inputs[0].data.shape[0]) for i in range(len(requests))]
    return inputs, sizes


def _split(
    requests: list[InferenceRequest], results: dict[str, np.ndarray], sizes: list[int], config: ModelConfig
) -> list[InferenceResponse]:
    responses: list[InferenceResponse] = []
    start = 0
    for request, size in zip(requests, sizes):
        part = {name: array[start : start + size] for name, array in results.items()}
        responses.append(InferenceResponse(outputs=_tensors(part, _requested(request, config), config, True)))
        start += size
    return responses


def _run_one(request: InferenceRequest, config: ModelConfig, run: RunFunction, error_of: ErrorFunction) -> InferenceResponse:
    wanted = _requested(request, config)
    try:
        results = run({t.name: t.data for t in request.inputs}, wanted)
        return InferenceResponse(outputs=_tensors(results, wanted, config, config.max_batch_size > 0))
    except NaiadError as exc:
        return InferenceResponse(error=exc)
    except Exception as exc:  # noqa: BLE001 - a framework error answers this request only
        return InferenceResponse(error=error_of(exc))


def _tensors(results: dict[str, np.ndarray], wanted: list[str], config: ModelConfig, batched: bool) -> list[Tensor]:
    tensors: list[Tensor] = []
    for name in wanted:
        spec = config.output_by_name[name]
        array = results[name]
        if spec.reshape is not None:
            # The model produces the `reshape` shape; clients see `dims`.
            target = ([array.shape[0]] if batched else []) + list(spec.dims)
            if target.count(-1) <= 1:
                array = array.reshape(target)
        if spec.datatype == "BYTES":
            tensor = Tensor(name, "BYTES", tuple(array.shape), array.astype(object, copy=False))
        else:
            tensor = Tensor.from_numpy(name, array, spec.datatype)
        tensors.append(tensor)
    return tensors
