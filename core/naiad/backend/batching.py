"""Opt-in helpers for framework backends: stack a batch of requests into one tensor per
input, and split the framework's batched outputs back into per-request results.

Two levels:

* `Batch` does the whole round trip from the model's config::

      batch = Batch.stack(requests, self.model.context.config)
      outputs = session.run(batch.inputs)        # {name: array with batch.total rows}
      return batch.responses(outputs)

  Inputs declared `allow_ragged_batch` are flattened and concatenated into one 1-D tensor,
  the config's `batch_input` entries (element counts, accumulated counts, item shapes) are
  generated so the model can find each request's elements, and output datatypes follow
  the config. A model without a batch dimension gets one request's arrays as they are.
* `group_stackable`, `stack_requests` and `split_outputs` are the single steps, for
  backends that drive them themselves (e.g. to batch what they can of requests whose
  variable dims differ; the schedulers already batch only requests whose non-ragged
  shapes agree).

BYTES (object arrays) stack like every other datatype. The time spent stacking and
splitting on an instance's thread is reported in statistics as the execution's
compute_input / compute_output, apart from compute_infer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..config.model_config import ModelConfig
from ..config.model_io import model_outputs
from ..datatypes import config_type_to_datatype, datatype_of, numpy_dtype
from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..protos import model_config_pb2 as pb
from ..tensor import Tensor
from .output_reshape import apply_output_reshape

__all__ = [
    "Batch",
    "Concatenate",
    "Destination",
    "RunFunction",
    "execute_by_name",
    "run_isolating_failures",
    "StackedBatch",
    "group_stackable",
    "stack_requests",
    "split_outputs",
    "split_output_tensors",
    "take_phase_times",
]

# Time spent stacking inputs and splitting outputs on each instance thread, so that
# statistics can report compute_input / compute_output apart from compute_infer.
_phases = threading.local()


def take_phase_times() -> tuple[int, int]:
    """(input_ns, output_ns) the helpers spent on this thread since the last call."""
    times = _phase_times()
    result = (times[_INPUT], times[_OUTPUT])
    times[_INPUT] = times[_OUTPUT] = 0
    return result


_INPUT, _OUTPUT = 0, 1


def _phase_times() -> list[int]:
    """This thread's accumulator: [input_ns, output_ns]."""
    try:
        return _phases.times  # type: ignore[no-any-return]
    except AttributeError:
        _phases.times = [0, 0]
        return _phases.times  # type: ignore[no-any-return]


def _add_phase(phase: int, began_ns: int) -> None:
    _phase_times()[phase] += time.monotonic_ns() - began_ns


# -- single steps -------------------------------------------------------------------------


@dataclass(slots=True)
class StackedBatch:
    """Inputs of several requests concatenated along axis 0.

    `sizes[i]` is how many rows request `i` contributed (its batch size), so outputs are
    split back in the same order with `split_outputs`.
    """

    inputs: dict[str, np.ndarray]
    sizes: list[int]

    @property
    def total(self) -> int:
        return sum(self.sizes)


# What requests must share to be stacked: each input's name, datatype and non-batch dims.
_Signature = tuple[tuple[str, str, tuple[int, ...]], ...]


def _signature(request: InferenceRequest) -> _Signature:
    return tuple(sorted((t.name, t.datatype, tuple(t.shape[1:])) for t in request.inputs))


def group_stackable(requests: list[InferenceRequest]) -> list[list[int]]:
    """Indices of `requests` grouped so every group can be stacked: same input names,
    datatypes and non-batch dimensions. Groups keep the requests' order."""
    groups: dict[_Signature, list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(_signature(request), []).append(index)
    return list(groups.values())


#: Where a stacked input goes: (input name, shape, dtype) -> an array of that shape and dtype
#: to fill, or None to let stacking allocate it (a GPU backend hands out pinned host memory).
Destination = Callable[[str, tuple[int, ...], np.dtype], np.ndarray | None]

#: How one input's arrays become the stacked input: (arrays, out) -> their concatenation along
#: axis 0, written into `out` when it is not None (what `into` handed out). The default is
#: numpy's, which gives the interpreter lock away around each array's copy and takes it back
#: after: beside a busy event loop each taking back can wait a switch interval (5 ms), so a
#: batch of 32 requests may wait 32 times. A framework that copies the whole input in one call
#: without the lock (torch.cat) waits once (ABI 2.6).
Concatenate = Callable[[list[np.ndarray], np.ndarray | None], np.ndarray]


def numpy_concatenate(arrays: list[np.ndarray], out: np.ndarray | None) -> np.ndarray:
    return np.concatenate(arrays, axis=0, out=out)


def stack_requests(
    requests: Sequence[InferenceRequest],
    names: list[str] | None = None,
    ragged: frozenset[str] | set[str] = frozenset(),
    into: Destination | None = None,
    concatenate: Concatenate = numpy_concatenate,
) -> StackedBatch:
    """Concatenate each input along axis 0 (the batch dimension of batching models).

    `names` limits the inputs stacked (default: the first request's inputs). Every request
    must carry every named input with matching non-batch dimensions (`group_stackable`
    makes groups for which that holds), except inputs named in `ragged`, which are
    flattened and concatenated. `into` chooses where each stacked input is written (one
    request's input is copied there too); without it a lone request's arrays are the batch.
    `concatenate` does the copying (numpy's by default).
    """
    if not requests:
        raise ValueError("stack_requests needs at least one request")
    began = time.monotonic_ns()
    try:
        first = requests[0]
        if len(requests) == 1 and names is None and into is None:
            # Nothing to concatenate: the request's arrays are the batch.
            single = {t.name: t.data.reshape(-1) if t.name in ragged else t.data for t in first.inputs}
            head = first.inputs[0] if first.inputs else None
            return StackedBatch(single, [int(head.shape[0]) if head is not None and head.shape else 1])
        wanted = names if names is not None else [t.name for t in first.inputs]
        sizes: list[int] = []
        for request in requests:
            tensor = request.input(wanted[0]) if wanted else (request.inputs[0] if request.inputs else None)
            sizes.append(int(tensor.shape[0]) if tensor is not None and tensor.shape else 1)
        inputs: dict[str, np.ndarray] = {}
        for name in wanted:
            arrays = []
            for request in requests:
                tensor = request.input(name)
                if tensor is None:
                    raise NaiadError.invalid(f"input '{name}' is missing from a request of the batch")
                arrays.append(tensor.data.reshape(-1) if name in ragged else tensor.data)
            if len(arrays) > 1 and name not in ragged and any(a.shape[1:] != arrays[0].shape[1:] for a in arrays):
                raise NaiadError.internal(
                    f"input '{name}' has different shapes across the batch "
                    f"({sorted({tuple(a.shape) for a in arrays})}); declare it allow_ragged_batch or batch "
                    "only requests of one shape"
                )
            inputs[name] = _concatenate(name, arrays, into, concatenate)
        return StackedBatch(inputs, sizes)
    finally:
        _add_phase(_INPUT, began)


def _concatenate(name: str, arrays: list[np.ndarray], into: Destination | None, concatenate: Concatenate) -> np.ndarray:
    head = arrays[0]
    same_dtype = all(a.dtype == head.dtype for a in arrays)
    if into is not None and head.ndim > 0 and same_dtype:
        shape = (sum(int(a.shape[0]) for a in arrays), *head.shape[1:])
        destination = into(name, shape, head.dtype)
        if destination is not None:
            return concatenate(arrays, destination)
    if len(arrays) == 1:
        return head
    # Mixed datatypes are numpy's to promote, as before.
    return concatenate(arrays, None) if same_dtype else numpy_concatenate(arrays, None)


def split_outputs(array: np.ndarray, sizes: list[int], name: str = "output") -> list[np.ndarray]:
    """Split a batched output into one array per request (views, no copies).

    Raises NaiadError when the output's first dimension does not hold the whole batch,
    which means the model does not batch along axis 0 as its config claims.
    """
    began = time.monotonic_ns()
    try:
        total = sum(sizes)
        if len(sizes) == 1:
            return [array]
        if array.ndim == 0 or array.shape[0] != total:
            raise NaiadError.internal(
                f"output '{name}' has shape {list(array.shape)}; a batch of {total} needs its first "
                f"dimension to be {total} to split it between {len(sizes)} requests"
            )
        bounds = np.cumsum(sizes)[:-1]
        return np.split(array, bounds, axis=0)
    finally:
        _add_phase(_OUTPUT, began)


def split_output_tensors(
    outputs: Mapping[str, np.ndarray], sizes: Sequence[int], datatypes: Mapping[str, str] | None = None
) -> list[list[Tensor]]:
    """Cut each batch output into per-request tensors of `sizes` rows; the datatype of an
    output is `datatypes[name]` when given (a config's), else the array's."""
    result: list[list[Tensor]] = [[] for _ in sizes]
    for name, array in outputs.items():
        array = np.asarray(array)
        datatype = (datatypes or {}).get(name) or datatype_of(array)
        if datatype == "BYTES" and array.dtype != object:
            array = array.astype(object)
        elif datatype not in ("BYTES", "BF16") and array.dtype != numpy_dtype(datatype):
            array = array.astype(numpy_dtype(datatype))
        for index, part in enumerate(split_outputs(array, list(sizes), name)):
            result[index].append(Tensor(name, datatype, part.shape, part))
    return result


# -- the whole round trip -----------------------------------------------------------------


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
    def stack(
        cls,
        requests: Sequence[InferenceRequest],
        config: ModelConfig | None = None,
        into: Destination | None = None,
        leave: Collection[str] = (),
        concatenate: Concatenate = numpy_concatenate,
    ) -> Batch:
        """Stack `requests`. With `config`, ragged inputs, `batch_input` and models
        without a batch dimension are handled as the config says; `into` and `concatenate`
        as for `stack_requests`. Inputs named in `leave` are not stacked (nor in `inputs`): the
        backend gathers them itself (a GPU backend, from device memory)."""
        if not requests:
            raise ValueError("cannot stack an empty batch")
        layout = config.derived(_BatchLayout.of) if config is not None else None
        if layout is not None and not layout.batched:
            if len(requests) > 1:
                raise NaiadError.internal(
                    f"model '{layout.name}' has no batch dimension and cannot run {len(requests)} requests as one batch"
                )
            stacked = StackedBatch({t.name: t.data for t in requests[0].inputs if t.name not in leave}, [1])
        else:
            names = [t.name for t in requests[0].inputs if t.name not in leave] if leave else None
            ragged = layout.ragged if layout is not None else frozenset()
            stacked = stack_requests(requests, names, ragged, into, concatenate)
        batch = cls(list(requests), stacked.sizes, stacked.inputs)
        if layout is not None:
            batch.output_datatypes = dict(layout.output_datatypes)
            if layout.batch_inputs:
                began = time.monotonic_ns()
                for batch_input in layout.batch_inputs:
                    array = _batch_input(batch_input, requests)
                    for target in batch_input.target_name:
                        batch.inputs[target] = array
                _add_phase(_INPUT, began)
        return batch

    def responses(self, outputs: Mapping[str, np.ndarray]) -> list[InferenceResponse]:
        """One response per request, holding its rows of every output."""
        per_request = split_output_tensors(outputs, self.sizes, self.output_datatypes)
        return [InferenceResponse(outputs=tensors) for tensors in per_request]


@dataclass(frozen=True, slots=True)
class _BatchLayout:
    """What stacking reads of a model's config, read once per config (`ModelConfig.derived`)."""

    name: str
    batched: bool
    ragged: frozenset[str]
    batch_inputs: tuple[pb.BatchInput, ...]
    output_datatypes: dict[str, str]

    @classmethod
    def of(cls, config: ModelConfig) -> _BatchLayout:
        return cls(
            name=config.name,
            batched=config.max_batch_size > 0,
            ragged=frozenset(s.name for s in config.inputs if s.allow_ragged_batch),
            batch_inputs=tuple(config.proto.batch_input),
            output_datatypes={s.name: s.datatype for s in model_outputs(config)},
        )


def _batch_input(batch_input: pb.BatchInput, requests: Sequence[InferenceRequest]) -> np.ndarray:
    """The tensor `batch_input` asks for, computed from the source input of each request."""
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


# -- whole executions -----------------------------------------------------------------------

# A framework call: (inputs by config name, output names wanted) -> outputs by name.
RunFunction = Callable[[dict[str, np.ndarray], list[str]], Mapping[str, np.ndarray]]


def run_isolating_failures(
    requests: list[InferenceRequest], run: Callable[[list[InferenceRequest]], list[InferenceResponse]]
) -> list[InferenceResponse]:
    """`run(requests)` as one batch; when it raises NaiadError, each request runs alone, so
    a request the framework refuses fails by itself instead of failing its neighbours."""
    if len(requests) > 1:
        try:
            return run(requests)
        except NaiadError:
            pass
    responses: list[InferenceResponse] = []
    for request in requests:
        try:
            responses.extend(run([request]))
        except NaiadError as exc:
            responses.append(InferenceResponse(error=exc))
    return responses


def execute_by_name(
    requests: list[InferenceRequest],
    config: ModelConfig,
    run: RunFunction,
    error_of: Callable[[Exception], NaiadError],
) -> list[InferenceResponse]:
    """The whole `execute` of a backend whose framework takes and returns tensors by name:
    stack the requests, call `run` once with the outputs any request wants, split the
    outputs back (config `reshape` applied), and isolate failures per request. `error_of`
    turns a framework exception into the error the client reads."""

    def run_batch(batch_requests: list[InferenceRequest]) -> list[InferenceResponse]:
        batch = Batch.stack(batch_requests, config)
        wanted_names = (
            {o.name for r in batch_requests for o in r.outputs} if all(r.outputs for r in batch_requests) else None
        )
        # State outputs are always fetched: the sequence batcher keeps them for the next request.
        wanted = [
            spec.name
            for spec in model_outputs(config)
            if wanted_names is None or spec.name in wanted_names or spec.name not in config.output_by_name
        ]
        try:
            outputs = run(batch.inputs, wanted)
        except NaiadError:
            raise
        except Exception as exc:  # noqa: BLE001 - each framework raises its own classes
            raise error_of(exc) from None
        responses = batch.responses(outputs)
        apply_output_reshape(responses, config)
        return responses

    return run_isolating_failures(requests, run_batch)
