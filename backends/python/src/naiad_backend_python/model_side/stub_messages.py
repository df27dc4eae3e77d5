"""The messages between the server and a model's process (the stub): one class each.

Both sides import this module; the server's `StubConnection` and the stub's `Channel`
frame them with naiad_wire.interprocess (a length, then a pickle the reader's unpickler
refuses classes in). A message travels as a plain tuple, ``(op, *fields)``, `op` a number
of `Op`: a class would have to be named in the pickle and the reader refuses names, and a
tuple pickles smaller and reads faster than a dict keyed by strings. Each class is a
NamedTuple, that tuple with names and types, so most messages need no code of their own to
travel (a slotted dataclass costs as much to build and read, measured, and its fields would
be copied out for each). Execute and result are on every request's path: what their types
cost beside dicts is in docs/history/performance.md (backends/python/bench/message_cost.py).
The records a message holds (`RequestItem`, `ResponseItem`) travel as plain tuples inside
it; `pack` and `unpack` convert them.

Tensors travel as naiad_wire descriptors (`encode_array`): small ones inside the message,
larger ones in the sender's shared-memory ring. Two locations are this backend's own: an input
at ``("d", handle, gpu, offset)`` sits in a client's CUDA shared-memory region, which the stub
opens (device_memory.py), and an output at ``("w",)`` was written by the stub into the region the
request placed it in (`RequestItem.placed_outputs`). A message that may place tensors has a
`mark` last: the ring's mark once its tensors are placed, which the reader hands back to
its ring (`RingReader.consumed`) once it has read them.

server -> stub
    `Init` (once), `Execute`, `BlsResponse`, `Reply` (to a query of the model), `ForgetRegions`,
    `Finalize`.
stub -> server
    `Ready` or `InitError` (once), `Result` (one per `Execute`), `Respond` (a response sent
    through a response sender), `IsCancelled`, `Bls`, `BlsCancel`, `ModelControl`, `Log`,
    the five metric messages, `Finalized`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from naiad_wire.interprocess.messages import pack_frame, unpack_message
from naiad_wire.interprocess.shm_ring import RingWriter

__all__ = [
    "Op",
    "TensorDescriptor",
    "ErrorPair",
    "RequestItem",
    "ResponseItem",
    "Init",
    "Ready",
    "InitError",
    "Execute",
    "Result",
    "Respond",
    "IsCancelled",
    "Bls",
    "BlsResponse",
    "BlsCancel",
    "ModelControl",
    "Reply",
    "Log",
    "MetricFamilyNew",
    "MetricFamilyDelete",
    "MetricNew",
    "MetricUpdate",
    "MetricValue",
    "Finalize",
    "Finalized",
    "ForgetRegions",
    "StubMessage",
    "MalformedMessage",
    "pack",
    "pack_placing",
    "unpack",
]

# (name, datatype, shape, location), as naiad_wire's encode_array makes and decode_array reads.
TensorDescriptor = tuple[Any, ...]
# (code name, text): a TritonError's code as `TritonError.code_name()` spells it, and its message.
ErrorPair = tuple[str, str]


class Op(enum.IntEnum):
    """The number that names a message's class on the wire (the first item of its tuple)."""

    INIT = 1
    READY = 2
    INIT_ERROR = 3
    EXECUTE = 4
    RESULT = 5
    RESPOND = 6
    IS_CANCELLED = 7
    BLS = 8
    BLS_RESPONSE = 9
    BLS_CANCEL = 10
    MODEL_CONTROL = 11
    REPLY = 12
    LOG = 13
    METRIC_FAMILY_NEW = 14
    METRIC_FAMILY_DELETE = 15
    METRIC_NEW = 16
    METRIC_UPDATE = 17
    METRIC_VALUE = 18
    FINALIZE = 19
    FINALIZED = 20
    FORGET_REGIONS = 21


# -- records inside messages ---------------------------------------------------------------


class RequestItem(NamedTuple):
    """One request of an `Execute` batch."""

    key: int  # the server's number for the request: responses and queries about it name it
    request_id: str
    correlation_id: int | str
    flags: int  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END
    timeout_us: int
    parameters: dict[str, Any]
    output_names: list[str]  # what the client asked for, every output when it named none
    inputs: list[TensorDescriptor]
    # Outputs the client placed in CUDA shared memory, for the model's process to write there
    # when the model makes them on a GPU: name -> (region's IPC handle, GPU, offset, byte size).
    placed_outputs: dict[str, tuple[bytes, int, int, int]] = {}


class ResponseItem(NamedTuple):
    """One response: of an execute (`Result`, `Respond`) or of a BLS call (`BlsResponse`)."""

    outputs: list[TensorDescriptor]
    error: ErrorPair | None
    parameters: dict[str, Any]


# -- server -> stub ------------------------------------------------------------------------


class Init(NamedTuple):
    """Load the model: run `TritonPythonModel.initialize` with `args`."""

    model_file: str
    args: dict[str, str]
    decoupled: bool
    label: str  # "model 'x' instance 'x_0_0'", for messages
    # The server's busy-poll window (naiad_wire.busy_poll), which the process polls for after
    # its answers; 0: it sleeps as soon as it has sent them.
    busy_poll_us: int = 0


class Execute(NamedTuple):
    """Run `execute` on a batch; the stub answers with one `Result` of the same `call_id`."""

    call_id: int
    model: tuple[str, int]  # name and version, for the requests' model_name()/model_version()
    requests: list[RequestItem]
    mark: int | None = None


class BlsResponse(NamedTuple):
    """A response to the model's `Bls` query `qid`; None when a decoupled call ends with
    no response of its own (only the final flag)."""

    qid: int
    final: bool
    response: ResponseItem | None
    mark: int | None = None


class Reply(NamedTuple):
    """The answer to a query of the model (`IsCancelled`, `ModelControl`, the metric
    messages that carry a `qid`): `value`, or `error` when the server refused."""

    qid: int
    value: Any = None
    error: str | None = None


class Finalize(NamedTuple):
    """Run `finalize` and exit; the stub says `Finalized` first."""


class ForgetRegions(NamedTuple):
    """These clients' CUDA regions were unregistered: close them (by IPC handle)."""

    handles: list[bytes]


# -- stub -> server ------------------------------------------------------------------------


class Ready(NamedTuple):
    """`initialize` returned: the model serves."""

    pid: int


class InitError(NamedTuple):
    """`initialize` raised (the process exits after sending this)."""

    message: str
    traceback: str


class Result(NamedTuple):
    """The outcome of `Execute` `call_id`: a response per request (None for a request whose
    responses go through its sender, and `responses` None for a decoupled model), with the
    positions of the requests the model rescheduled; or `error` when execute raised."""

    call_id: int
    responses: list[ResponseItem | None] | None = None
    rescheduled: Sequence[int] = ()
    error: ErrorPair | None = None
    mark: int | None = None


class Respond(NamedTuple):
    """A response sent through request `key`'s response sender; None when the model sent
    only the final flag."""

    key: int
    final: bool
    response: ResponseItem | None
    mark: int | None = None


class IsCancelled(NamedTuple):
    """Whether request `key`'s client went away; answered by a `Reply` with a bool."""

    qid: int
    key: int


class Bls(NamedTuple):
    """Run a request on another model (BLS); answered by one `BlsResponse`, or a stream of
    them when `decoupled`, all with this `qid`."""

    qid: int
    decoupled: bool
    model_name: str
    model_version: int
    request_id: str
    correlation_id: int | str
    flags: int
    timeout: int
    parameters: dict[str, Any]
    output_names: list[str]
    inputs: list[TensorDescriptor]
    mark: int | None = None


class BlsCancel(NamedTuple):
    """Cancel the decoupled BLS call `qid` (the model cancelled its response iterator)."""

    qid: int


class ModelControl(NamedTuple):
    """The model loading API ("ready", "load", "unload" another model); answered by a
    `Reply` whose value is the action's result."""

    qid: int
    action: str
    arguments: dict[str, Any]


class Log(NamedTuple):
    """A line of the model's log (`pb_utils.Logger`): `level` is a Logger.LogLevel number."""

    level: int
    message: str


class MetricFamilyNew(NamedTuple):
    qid: int
    handle: int  # the model side's number for the family
    name: str
    description: str
    kind: str  # "counter", "gauge" or "histogram"


class MetricFamilyDelete(NamedTuple):
    """Sent without waiting (from `MetricFamily.__del__`): no reply."""

    handle: int


class MetricNew(NamedTuple):
    qid: int
    handle: int  # the model side's number for the metric
    family: int
    labels: dict[str, str]
    buckets: list[float] | None


class MetricUpdate(NamedTuple):
    """Sent without waiting: no reply, applied in the order sent."""

    handle: int
    operation: str  # "increment", "set" or "observe"
    value: float


class MetricValue(NamedTuple):
    qid: int
    handle: int


class Finalized(NamedTuple):
    """`finalize` has run; the process exits next."""


StubMessage = (
    Init
    | Ready
    | InitError
    | Execute
    | Result
    | Respond
    | IsCancelled
    | Bls
    | BlsResponse
    | BlsCancel
    | ModelControl
    | Reply
    | Log
    | MetricFamilyNew
    | MetricFamilyDelete
    | MetricNew
    | MetricUpdate
    | MetricValue
    | Finalize
    | Finalized
    | ForgetRegions
)

_CLASS_OF_OP: dict[Op, Any] = {
    Op.INIT: Init,
    Op.READY: Ready,
    Op.INIT_ERROR: InitError,
    Op.EXECUTE: Execute,
    Op.RESULT: Result,
    Op.RESPOND: Respond,
    Op.IS_CANCELLED: IsCancelled,
    Op.BLS: Bls,
    Op.BLS_RESPONSE: BlsResponse,
    Op.BLS_CANCEL: BlsCancel,
    Op.MODEL_CONTROL: ModelControl,
    Op.REPLY: Reply,
    Op.LOG: Log,
    Op.METRIC_FAMILY_NEW: MetricFamilyNew,
    Op.METRIC_FAMILY_DELETE: MetricFamilyDelete,
    Op.METRIC_NEW: MetricNew,
    Op.METRIC_UPDATE: MetricUpdate,
    Op.METRIC_VALUE: MetricValue,
    Op.FINALIZE: Finalize,
    Op.FINALIZED: Finalized,
    Op.FORGET_REGIONS: ForgetRegions,
}
# Plain ints on the wire: an Op member would pickle as a reference to its class, which the
# reader refuses.
_OP_OF_CLASS: dict[type, int] = {cls: int(op) for op, cls in _CLASS_OF_OP.items()}


class MalformedMessage(ValueError):
    """What arrived is not a message of this module (a bug, or a process that is not the
    peer it should be): the reader drops the connection."""


# -- the wire form ---------------------------------------------------------------------------
# A writer returns a message's whole wire tuple, `mark` (the ring's, when the message placed
# tensors) last; the records inside become plain tuples. A reader takes the whole wire tuple
# and checks every count. Readers build the classes with `tuple.__new__` (a fraction of a
# call to the class), and neither side goes through more calls than it must.

_new = tuple.__new__
_REQUEST_FIELDS = len(RequestItem._fields)
_RESPONSE_FIELDS = len(ResponseItem._fields)


def _count_error(name: str, got: int, count: int) -> ValueError:
    return ValueError(f"{name} has {got} fields, not {count}")


def _plain_writer(cls: type) -> Callable[[Any, int | None], tuple[Any, ...]]:
    op = _OP_OF_CLASS[cls]
    return lambda message, mark: (op, *message)


def _plain_reader(cls: Any) -> Callable[[tuple[Any, ...]], Any]:
    count = len(cls._fields)

    def read(wire: tuple[Any, ...]) -> Any:
        if len(wire) != count + 1:
            raise _count_error(cls.__name__, len(wire) - 1, count)
        return _new(cls, wire[1:])

    return read


def _response(data: Any) -> ResponseItem | None:
    if data is None:
        return None
    if len(data) != _RESPONSE_FIELDS:
        raise _count_error("ResponseItem", len(data), _RESPONSE_FIELDS)
    return _new(ResponseItem, data)


# `record[:]` is a record's plain tuple (a slice of a tuple subclass is a tuple), the
# cheapest conversion there is.


def _write_execute(m: Execute, mark: int | None) -> tuple[Any, ...]:
    return (_EXECUTE, m.call_id, m.model, [r[:] for r in m.requests], mark)


def _read_execute(wire: tuple[Any, ...]) -> Execute:
    _, call_id, model, requests, mark = wire
    items = [_new(RequestItem, r) for r in requests]
    for item in items:
        if len(item) != _REQUEST_FIELDS:
            raise _count_error("RequestItem", len(item), _REQUEST_FIELDS)
    return _new(Execute, (call_id, model, items, mark))


def _write_result(m: Result, mark: int | None) -> tuple[Any, ...]:
    responses = m.responses
    plain = None if responses is None else [None if r is None else r[:] for r in responses]
    return (_RESULT, m.call_id, plain, m.rescheduled, m.error, mark)


def _read_result(wire: tuple[Any, ...]) -> Result:
    _, call_id, responses, rescheduled, error, mark = wire
    if responses is not None:
        responses = [None if r is None else _new(ResponseItem, r) for r in responses]
        for item in responses:
            if item is not None and len(item) != _RESPONSE_FIELDS:
                raise _count_error("ResponseItem", len(item), _RESPONSE_FIELDS)
    return _new(Result, (call_id, responses, rescheduled, error, mark))


def _write_respond(m: Respond, mark: int | None) -> tuple[Any, ...]:
    return (_RESPOND, m.key, m.final, None if m.response is None else m.response[:], mark)


def _read_respond(wire: tuple[Any, ...]) -> Respond:
    _, key, final, response, mark = wire
    return _new(Respond, (key, final, _response(response), mark))


def _write_bls_response(m: BlsResponse, mark: int | None) -> tuple[Any, ...]:
    return (_BLS_RESPONSE, m.qid, m.final, None if m.response is None else m.response[:], mark)


def _read_bls_response(wire: tuple[Any, ...]) -> BlsResponse:
    _, qid, final, response, mark = wire
    return _new(BlsResponse, (qid, final, _response(response), mark))


def _write_bls(m: Bls, mark: int | None) -> tuple[Any, ...]:
    return (_BLS, *m[:-1], mark)


_EXECUTE, _RESULT, _RESPOND, _BLS_RESPONSE, _BLS = (
    int(op) for op in (Op.EXECUTE, Op.RESULT, Op.RESPOND, Op.BLS_RESPONSE, Op.BLS)
)
_WRITERS: dict[type, Callable[[Any, int | None], tuple[Any, ...]]] = {
    **{cls: _plain_writer(cls) for cls in _OP_OF_CLASS},
    Execute: _write_execute,
    Result: _write_result,
    Respond: _write_respond,
    BlsResponse: _write_bls_response,
    Bls: _write_bls,
}
_READERS: dict[int, Callable[[tuple[Any, ...]], Any]] = {
    **{int(op): _plain_reader(cls) for op, cls in _CLASS_OF_OP.items()},
    _EXECUTE: _read_execute,
    _RESULT: _read_result,
    _RESPOND: _read_respond,
    _BLS_RESPONSE: _read_bls_response,
}


def pack(message: StubMessage) -> bytes:
    """The frame of a message that placed no tensors in a ring."""
    return pack_frame(_WRITERS[type(message)](message, getattr(message, "mark", None)))


def pack_placing(build: Callable[[RingWriter], StubMessage], ring: RingWriter) -> bytes:
    """The frame of the message `build` makes while placing its tensors in `ring`, with the
    ring's mark when it used the ring. Call under `ring.lock`, and send the frame before
    anything else is placed in `ring`, so ring order is socket order."""
    message = build(ring)
    return pack_frame(_WRITERS[type(message)](message, ring.mark()))


def unpack(body: bytes) -> StubMessage:
    """The message of a frame's body; MalformedMessage when it is none of this module's."""
    wire = unpack_message(body)
    try:
        message: StubMessage = _READERS[wire[0]](wire)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        op = wire[0] if isinstance(wire, tuple) and wire else None
        raise MalformedMessage(f"not a stub message (operation {op!r}): {type(exc).__name__}: {exc}") from None
    return message
