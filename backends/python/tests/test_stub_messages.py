"""The messages between the server and a model's process: every operation has one class,
every class comes back from its frame equal (records inside as their classes, tensors out of
the ring with the ring's mark), and what is not a message is refused with its operation named."""

from __future__ import annotations

import os
import pickle
import struct
from collections.abc import Iterator

import numpy as np
import pytest
from naiad_backend_python.model_side import stub_messages as m

from naiad_wire.interprocess.messages import FrameReader, decode_array, encode_array, pack_frame
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd

RESPONSE = m.ResponseItem([], ("INVALID_ARG", "bad input"), {"p": 1})

# One message of every class, with records and values of the kinds each field holds.
EXAMPLES: list[m.StubMessage] = [
    m.Init("/models/x/1/model.py", {"model_name": "x"}, False, "model 'x' instance 'x_0_0'"),
    m.Ready(1234),
    m.InitError("ValueError: no", "Traceback ..."),
    m.Execute(7, ("x", 1), [m.RequestItem(3, "id", 0, 1, 0, {"a": "b"}, ["OUT"], [])]),
    m.Result(7, [RESPONSE, None], [1], None),
    m.Result(8, error=("INTERNAL", "it raised")),
    m.Respond(3, True, None),
    m.Respond(3, False, RESPONSE),
    m.IsCancelled(11, 3),
    m.Bls(12, True, "other", -1, "", "seq-1", 0, 0, {}, ["OUT"], []),
    m.BlsResponse(12, False, RESPONSE),
    m.BlsResponse(12, True, None),
    m.BlsCancel(12),
    m.ModelControl(13, "load", {"model_name": "y", "config": None}),
    m.Reply(13, True),
    m.Reply(14, error="refused"),
    m.Log(2, "a line"),
    m.MetricFamilyNew(15, 1, "family", "what it counts", "counter"),
    m.MetricFamilyDelete(1),
    m.MetricNew(16, 2, 1, {"label": "v"}, [0.5, 1.0]),
    m.MetricUpdate(2, "increment", 1.5),
    m.MetricValue(17, 2),
    m.Finalize(),
    m.Finalized(),
    m.ForgetRegions([b"h" * 64]),
    # An input in a client's CUDA region and an output placed in one (lent_regions.py).
    m.Execute(
        8,
        ("x", 1),
        [
            m.RequestItem(
                4,
                "",
                0,
                0,
                0,
                {},
                ["OUT"],
                [("IN", "FP32", (4,), ("d", b"h" * 64, 0, 16))],
                {"OUT": (b"h" * 64, 0, 64, 16)},
            )
        ],
    ),
]


def _through_a_frame(frame: bytes) -> m.StubMessage:
    (body,) = FrameReader().feed(frame)
    return m.unpack(body)


@pytest.fixture
def ring() -> Iterator[tuple[RingWriter, RingReader]]:
    fd = create_ring_fd(1 << 20)
    try:
        yield RingWriter(fd), RingReader(fd)
    finally:
        os.close(fd)


def test_every_operation_has_one_message_class_and_every_example_comes_back_equal() -> None:
    classes = [type(message) for message in EXAMPLES]
    assert len({m.Op[_op_name(cls)] for cls in classes}) == len(m.Op)
    for message in EXAMPLES:
        received = _through_a_frame(m.pack(message))
        assert type(received) is type(message)
        assert received == message


def _op_name(cls: type) -> str:
    # MetricFamilyNew -> METRIC_FAMILY_NEW: the enum names each class's operation.
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in cls.__name__).lstrip("_")


def test_records_inside_messages_come_back_as_their_classes() -> None:
    execute = _through_a_frame(m.pack(EXAMPLES[3]))
    assert isinstance(execute, m.Execute)
    (request,) = execute.requests
    assert isinstance(request, m.RequestItem)
    assert (request.key, request.output_names, request.parameters) == (3, ["OUT"], {"a": "b"})
    result = _through_a_frame(m.pack(EXAMPLES[4]))
    assert isinstance(result, m.Result)
    assert result.responses is not None
    assert isinstance(result.responses[0], m.ResponseItem) and result.responses[1] is None
    assert result.responses[0].error == ("INVALID_ARG", "bad input")


def test_the_wire_form_is_a_plain_tuple_led_by_the_operation_number() -> None:
    # The reader's unpickler refuses every class; the frame must hold plain values only.
    (body,) = FrameReader().feed(m.pack(m.Respond(3, True, RESPONSE)))
    wire = pickle.loads(body)
    assert type(wire) is tuple
    assert wire[0] == m.Op.RESPOND and type(wire[0]) is int
    assert type(wire[3]) is tuple  # the ResponseItem, as a plain tuple


def test_tensors_travel_in_the_ring_and_the_message_carries_its_mark(ring: tuple[RingWriter, RingReader]) -> None:
    writer, reader = ring
    large = np.arange(50_000, dtype=np.float32)  # past the inline limit: it goes into the ring
    small = np.arange(4, dtype=np.int32)

    def build(ring: RingWriter) -> m.Execute:
        inputs = [encode_array(ring, "LARGE", "FP32", large), encode_array(ring, "SMALL", "INT32", small)]
        return m.Execute(1, ("x", 1), [m.RequestItem(5, "", 0, 0, 0, {}, ["OUT"], inputs)])

    with writer.lock:
        frame = m.pack_placing(build, writer)
    message = _through_a_frame(frame)
    assert isinstance(message, m.Execute)
    assert message.mark is not None
    (request,) = message.requests
    arrays = {name: array for name, _, array in (decode_array(reader, d) for d in request.inputs)}
    assert np.array_equal(arrays["LARGE"], large) and np.array_equal(arrays["SMALL"], small)
    reader.consumed(message.mark)


def test_a_message_that_placed_nothing_carries_no_mark(ring: tuple[RingWriter, RingReader]) -> None:
    writer, _ = ring
    with writer.lock:
        frame = m.pack_placing(lambda ring: m.Respond(3, True, None), writer)
    message = _through_a_frame(frame)
    assert message == m.Respond(3, True, None, None)


@pytest.mark.parametrize(
    ("wire", "named"),
    [
        ((99, 1, 2), "operation 99"),
        ((int(m.Op.READY), 1, 2), "operation 2"),  # one field too many
        ((int(m.Op.EXECUTE), 7, ("x", 1)), "operation 4"),  # fields missing
        ((int(m.Op.EXECUTE), 7, ("x", 1), [(1, 2)], None), "operation 4"),  # a request record cut short
        ({"op": "execute"}, "operation None"),  # the dict messages of old
        ((), "operation None"),
    ],
)
def test_what_is_not_a_message_is_refused_naming_its_operation(wire: object, named: str) -> None:
    body = pack_frame(wire)[struct.calcsize("<I") :]
    with pytest.raises(m.MalformedMessage, match=named):
        m.unpack(body)
