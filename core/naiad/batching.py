"""Batch helpers for backends: stack a batch of requests into one tensor per input, and
split the model's batch outputs back into one response per request.

A framework backend's `execute` typically reads::

    batch = Batch.stack(requests, self.model.context.config)
    outputs = session.run(batch.inputs)            # {name: array with sum(batch.sizes) rows}
    return batch.responses(outputs)

Stacking concatenates along the batch dimension (BYTES object arrays included); a model
without a batch dimension gets one request's arrays as they are. Inputs declared
`allow_ragged_batch` are flattened and concatenated into one 1-D tensor, and the config's
`batch_input` entries (element counts, accumulated counts, item shapes) are generated so
the model can find each request's elements. The schedulers only batch requests whose
non-ragged shapes agree, so stacking never has to pad. Time spent in `Batch.stack` and
`Batch.responses` is reported as the execution's compute_input / compute_output.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .datatypes import config_type_to_datatype, datatype_of, numpy_dtype
from .errors import NaiadError
from .inference import InferenceRequest, InferenceResponse
from .model_config import ModelConfig
from .protos import model_config_pb2 as pb
from .tensor import Tensor

__all__ = ["Batch", "stack_inputs", "split_outputs", "take_phase_times"]

# Time spent stacking inputs and splitting outputs on each instance thread, so that
# statistics can report compute_input / compute_output apart from compute_infer.
_phases = threading.local()


def take_phase_times() -> tuple[int, int]:
    """(input_ns, output_ns) the helpers spent on this thread since the last call."""
    result = (getattr(_phases, "input_ns", 0), getattr(_phases, "output_ns", 0))
    _phases.input_ns = 0
    _phases.output_ns = 0
    return result


def _add_phase(name: str, ns: int) -> None:
    setattr(_phases, name, getattr(_phases, name, 0) + ns)


@dataclass(slots=True)
class Batch:
    """`requests` as one batch: `inputs` maps each input name to the stacked array, and
    `sizes` holds each request's batch size (its rows in every stacked array)."""

    requests: list[InferenceRequest]
    sizes: list[int]
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    output_datatypes: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    @classmethod
    def stack(cls, requests: Sequence[InferenceRequest], config: ModelConfig | None = None) -> "Batch":
        """Stack `requests`. With `config`, ragged inputs, `batch_input` and models
        without a batch dimension are handled as the config says."""
        if not requests:
            raise ValueError("cannot stack an empty batch")
        began = time.monotonic_ns()
        try:
            return cls._stack(requests, config)
        finally:
            _add_phase("input_ns", time.monotonic_ns() - began)

    @classmethod
    def _stack(cls, requests: Sequence[InferenceRequest], config: ModelConfig | None) -> "Batch":
        batched = config is None or config.max_batch_size > 0
        if not batched and len(requests) > 1:
            raise NaiadError.internal(
                f"model '{config.name if config else ''}' has no batch dimension and cannot run "
                f"{len(requests)} requests as one batch"
            )
        ragged = {s.name for s in config.inputs if s.allow_ragged_batch} if config else set()
        sizes = [_batch_size(r) if batched else 1 for r in requests]
        inputs = stack_inputs(requests, ragged=ragged) if batched else {t.name: t.data for t in requests[0].inputs}
        batch = cls(list(requests), sizes, inputs)
        if config is not None:
            batch.output_datatypes = {s.name: s.datatype for s in config.outputs}
            for batch_input in config.proto.batch_input:
                array = _batch_input(batch_input, requests)
                for target in batch_input.target_name:
                    batch.inputs[target] = array
        return batch

    def responses(self, outputs: Mapping[str, np.ndarray]) -> list[InferenceResponse]:
        """One response per request, holding its rows of every output."""
        began = time.monotonic_ns()
        try:
            per_request = split_outputs(outputs, self.sizes, self.output_datatypes)
            return [InferenceResponse(outputs=tensors) for tensors in per_request]
        finally:
            _add_phase("output_ns", time.monotonic_ns() - began)


def stack_inputs(requests: Sequence[InferenceRequest], ragged: set[str] | frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """Concatenate each input of `requests` along axis 0 (flattened for `ragged` names).
    Every request must carry the same inputs with the same non-batch shapes."""
    names = [t.name for t in requests[0].inputs]
    stacked: dict[str, np.ndarray] = {}
    for name in names:
        parts = []
        for request in requests:
            tensor = request.input(name)
            if tensor is None:
                raise NaiadError.internal(f"input '{name}' is missing from one request of the batch")
            parts.append(tensor.data.reshape(-1) if name in ragged else tensor.data)
        if len(parts) == 1:
            stacked[name] = parts[0]
            continue
        first = parts[0].shape[1:]
        if name not in ragged and any(p.shape[1:] != first for p in parts):
            raise NaiadError.internal(
                f"input '{name}' has different shapes across the batch "
                f"({sorted({tuple(p.shape) for p in parts})}); declare it allow_ragged_batch or batch "
                "only requests of one shape"
            )
        stacked[name] = np.concatenate(parts, axis=0)
    return stacked


def split_outputs(
    outputs: Mapping[str, np.ndarray], sizes: Sequence[int], datatypes: Mapping[str, str] | None = None
) -> list[list[Tensor]]:
    """Cut each batch output into per-request tensors of `sizes` rows."""
    total = sum(sizes)
    bounds = np.cumsum([0, *sizes])
    result: list[list[Tensor]] = [[] for _ in sizes]
    for name, array in outputs.items():
        array = np.asarray(array)
        if len(sizes) > 1 and (array.ndim == 0 or array.shape[0] != total):
            raise NaiadError.internal(
                f"output '{name}' has shape {list(array.shape)}; a batch of {total} needs {total} rows to split"
            )
        datatype = (datatypes or {}).get(name) or datatype_of(array)
        if datatype == "BYTES" and array.dtype != object:
            array = array.astype(object)
        elif datatype not in ("BYTES", "BF16") and array.dtype != numpy_dtype(datatype):
            array = array.astype(numpy_dtype(datatype))
        for index in range(len(sizes)):
            part = array if len(sizes) == 1 else array[bounds[index] : bounds[index + 1]]
            result[index].append(Tensor(name, datatype, tuple(int(d) for d in part.shape), part))
    return result


def _batch_size(request: InferenceRequest) -> int:
    for tensor in request.inputs:
        if tensor.shape:
            return int(tensor.shape[0])
    return 1


def _batch_input(batch_input: pb.BatchInput, requests: Sequence[InferenceRequest]) -> np.ndarray:
    """The tensors `batch_input` asks for, computed from the source input of each request."""
    kind = pb.BatchInput.Kind.Name(batch_input.kind)
    dtype = numpy_dtype(config_type_to_datatype(pb.DataType.Name(batch_input.data_type)))
    source = batch_input.source_input[0] if batch_input.source_input else ""
    tensors = []
    for request in requests:
        tensor = request.input(source)
        if tensor is None:
            raise NaiadError.internal(f"batch_input {kind}: source input '{source}' is missing from a request")
        tensors.append(tensor)
    counts = [t.element_count for t in tensors]
    if kind == "BATCH_ELEMENT_COUNT":
        return np.asarray(counts, dtype=dtype)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT":
        return np.cumsum(counts).astype(dtype)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO":
        return np.concatenate([[0], np.cumsum(counts)]).astype(dtype)
    if kind == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":
        return np.zeros((max(counts),), dtype=dtype)
    # Item shapes: one row per batch item, the shape without the batch dimension.
    rows = [list(t.shape[1:]) for t in tensors for _ in range(t.shape[0] if t.shape else 1)]
    shapes = np.asarray(rows, dtype=dtype)
    if kind == "BATCH_ITEM_SHAPE_FLATTEN":
        return shapes.reshape(-1)
    return shapes
