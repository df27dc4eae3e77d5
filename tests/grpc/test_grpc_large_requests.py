"""A large ModelInfer or ModelStreamInfer request's raw_input_contents are read where they
landed: the message's other fields go to the protobuf parser, the tensors stay views of the
received bytes (field_views.py, rpc.py). What a client sees must not change: the same answers,
the same errors, for every way the message can arrive."""

from __future__ import annotations

import queue

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from raw_http2 import grpc_message
from tritonclient.grpc import service_pb2, service_pb2_grpc

from naiad.frontends.grpc.field_views import split_field
from naiad.frontends.grpc.rpc import Call, RpcDispatcher, RpcMethod, RpcSettings
from naiad.protos import grpc_service_pb2 as pb
from naiad_wire.grpc_status import RpcError, StatusCode
from naiad_wire.http2 import Http2Limits, Http2State, Stream

RAW = pb.ModelInferRequest.DESCRIPTOR.fields_by_name["raw_input_contents"].number


def _request(*tensors: bytes) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="m", model_version="2", id="req-1")
    request.parameters["priority"].int64_param = 3
    for index, data in enumerate(tensors):
        request.inputs.add(name=f"INPUT{index}", datatype="UINT8", shape=[len(data)])
        request.raw_input_contents.append(data)
    request.outputs.add(name="OUTPUT0")
    return request


# -- the field walk ---------------------------------------------------------------------------


def test_the_raw_contents_come_back_as_views_and_the_rest_parses_to_the_same_message():
    request = _request(b"\x01" * 70_000, b"", b"\x02\x03")
    encoded = request.SerializeToString()
    taken = split_field(encoded, 0, len(encoded), RAW)
    assert taken is not None
    rest, views = taken
    message = pb.ModelInferRequest.FromString(rest)
    assert [bytes(v) for v in views] == list(request.raw_input_contents)
    assert all(v.readonly for v in views)
    del request.raw_input_contents[:]
    assert message == request


def test_entries_between_other_fields_keep_their_order_and_unknown_fields_stay():
    # Fields in any order, as a hand-written client may send them; unknown fields of every
    # wire type (numbers no ModelInferRequest field has) go to the parser as they were.
    def field(number: int, wire: int, payload: bytes) -> bytes:
        return bytes([number << 3 | wire]) + payload

    name, unknown = field(1, 2, b"\x01m"), field(15, 0, b"\x96\x01")
    fixed = field(14, 1, bytes(8)) + field(13, 5, bytes(4))
    encoded = field(7, 2, b"\x03abc") + name + unknown + field(7, 2, b"\x02de") + fixed + field(7, 2, b"\x00")
    taken = split_field(encoded, 0, len(encoded), RAW)
    assert taken is not None
    rest, views = taken
    assert rest == name + unknown + fixed
    assert [bytes(v) for v in views] == [b"abc", b"de", b""]
    message = pb.ModelInferRequest.FromString(rest)
    assert message.model_name == "m" and not message.raw_input_contents


@pytest.mark.parametrize(
    "encoded",
    [
        b"\x3a",  # field 7's tag, no length
        b"\x3a\x05ab",  # a length past the end
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # a varint over ten bytes
        b"\x38\x01",  # field 7 as a varint (the parser keeps it as an unknown field)
        b"\x0b\x0c",  # a group
        b"\x0f",  # wire type 7
        b"\x11\x01\x02",  # a fixed64 cut short
    ],
)
def test_a_message_the_walk_cannot_vouch_for_goes_to_the_parser_whole(encoded):
    assert split_field(encoded, 0, len(encoded), RAW) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40).map(lambda b: ("raw", b)),
            st.text(max_size=10).map(lambda t: ("name", t)),
            st.integers(0, 2**63 - 1).map(lambda n: ("param", n)),
        ),
        max_size=12,
    ),
    st.binary(max_size=6),
)
def test_any_message_splits_into_what_the_parser_reads_from_it_whole(fields, prefix):
    request = pb.ModelInferRequest()
    for kind, value in fields:
        if kind == "raw":
            request.raw_input_contents.append(value)
        elif kind == "name":
            request.inputs.add(name=value)
        else:
            request.parameters[f"p{value % 5}"].int64_param = value
    encoded = request.SerializeToString()
    # Read at an offset of a larger buffer, as a message in a received frame is.
    data = prefix + encoded + prefix
    taken = split_field(data, len(prefix), len(prefix) + len(encoded), RAW)
    assert taken is not None
    rest, views = taken
    message = pb.ModelInferRequest.FromString(rest)
    message.raw_input_contents.extend(bytes(v) for v in views)
    assert message == request


# -- the transport's side ---------------------------------------------------------------------


def _call() -> Call:
    method = RpcMethod("/inference.GRPCInferenceService/ModelInfer", None, pb.ModelInferRequest, in_place_field=RAW)
    dispatcher = RpcDispatcher({method.name: method}, RpcSettings())
    return Call(dispatcher, Stream(1, Http2State(Http2Limits())), method, ())


@pytest.mark.parametrize("cuts", [[], [1], [3, 4, 5], [16_384, 32_768, 49_152], list(range(7, 90_000, 9_001))])
def test_a_large_request_in_any_pieces_is_one_message_with_its_tensors_in_place(cuts):
    request = _request(np.arange(80_000, dtype=np.uint8).tobytes(), b"tail")
    body = grpc_message(request)
    call = _call()
    for start, end in zip([0, *cuts], [*cuts, len(body)]):
        call.data_received(body[start:end], False)
    assert call.in_place is not None
    assert [bytes(v) for v in call.in_place] == list(request.raw_input_contents)
    del request.raw_input_contents[:]
    assert call._request == request


def test_a_large_request_in_tiny_frames_is_gathered_into_one_buffer_and_copied_out_once():
    # 100-byte frames are not kept as an object each (a client could make the server hold
    # forty times what it sent); the buffer they fill is reused, so the message is copied out
    # of it, and its tensors are views of that copy.
    request = _request(np.arange(80_000, dtype=np.uint8).tobytes())
    body = grpc_message(request)
    call = _call()
    for start in range(0, len(body), 100):
        call.data_received(body[start : start + 100], False)
    assert call.in_place is not None
    assert [bytes(v) for v in call.in_place] == list(request.raw_input_contents)
    del request.raw_input_contents[:]
    assert call._request == request


def test_a_small_request_is_parsed_as_it_is():
    request = _request(b"small")
    call = _call()
    call.data_received(grpc_message(request), False)
    assert call.in_place is None
    assert call._request == request


def test_a_malformed_large_request_fails_as_the_parser_words_it():
    # A whole tensor, then an entry whose length runs past the end of the message.
    body = _request(bytes(40_000)).SerializeToString() + b"\x3a\x05ab"
    with pytest.raises(DecodeError) as parser:
        pb.ModelInferRequest.FromString(body)
    with pytest.raises(RpcError) as served:
        _call()._unary_data(b"\x00" + len(body).to_bytes(4, "big") + body)
    assert served.value.code == StatusCode.INTERNAL
    assert served.value.details == f"failed to parse the request message: {parser.value}"


# -- what a client sees -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(url):
    with tg.InferenceServerClient(url) as client:
        yield client


def _fp32(name: str, values: np.ndarray) -> tg.InferInput:
    tensor = tg.InferInput(name, list(values.shape), "FP32")
    tensor.set_data_from_numpy(values)
    return tensor


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_two_large_inputs_in_either_order_give_the_right_answer(client, compression):
    a = np.arange(60_000, dtype=np.float32)
    b = np.full(60_000, 0.5, dtype=np.float32)
    for inputs in ([_fp32("INPUT0", a), _fp32("INPUT1", b)], [_fp32("INPUT1", b), _fp32("INPUT0", a)]):
        result = client.infer("add_sub_wide", inputs, compression_algorithm=compression)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_stream_of_large_and_small_requests_gets_each_its_own_answer(url, compression):
    # A stream's messages share one receive buffer: each large one's tensors are views of a
    # copy of its own, taken with that message, so no other message is given them.
    sizes = [60_000, 3, 40_000, 60_000, 5]
    received: queue.Queue = queue.Queue()
    with tg.InferenceServerClient(url) as stream:
        stream.start_stream(lambda result, error: received.put((result, error)), compression_algorithm=compression)
        for index, size in enumerate(sizes):
            a = np.arange(size, dtype=np.float32) + index
            stream.async_stream_infer(
                "add_sub_wide", [_fp32("INPUT0", a), _fp32("INPUT1", a / 2)], request_id=str(index)
            )
        stream.stop_stream()
    answers = {}
    while not received.empty():
        result, error = received.get()
        assert error is None, error.message()
        answers[result.get_response().id] = (result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1"))
    assert sorted(answers) == [str(index) for index in range(len(sizes))]
    for index, size in enumerate(sizes):
        a = np.arange(size, dtype=np.float32) + index
        np.testing.assert_array_equal(answers[str(index)][0], a + a / 2)
        np.testing.assert_array_equal(answers[str(index)][1], a - a / 2)


def test_a_large_bytes_tensor_round_trips(client):
    values = np.array([f"item {i}".encode() * 3 for i in range(5_000)], dtype=object)
    tensor = tg.InferInput("INPUT0", [len(values)], "BYTES")
    tensor.set_data_from_numpy(values)
    assert list(client.infer("identity_bytes", [tensor]).as_numpy("OUTPUT0")) == list(values)


def test_large_requests_with_faults_get_the_errors_small_ones_get(url):
    def error(request: service_pb2.ModelInferRequest) -> str:
        with grpc.insecure_channel(url) as channel:
            with pytest.raises(grpc.RpcError) as failure:
                service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
        assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT, failure.value.details()
        return failure.value.details()

    data = np.zeros(20_000, np.float32).tobytes()
    short = service_pb2.ModelInferRequest(model_name="identity")
    short.inputs.add(name="INPUT0", datatype="FP32", shape=[20_001])
    short.raw_input_contents.append(data)
    assert "input byte size mismatch for input 'INPUT0' for model 'identity'. Expected 80004, got 80000" in error(short)
    extra = service_pb2.ModelInferRequest(model_name="identity")
    extra.inputs.add(name="INPUT0", datatype="FP32", shape=[20_000])
    extra.raw_input_contents.extend([data, data])
    assert "has 2 raw_input_contents entries, but only 1 of its inputs take raw data" in error(extra)
    mixed = service_pb2.ModelInferRequest(model_name="identity")
    mixed.inputs.add(name="INPUT0", datatype="FP32", shape=[1]).contents.fp32_contents.append(1.0)
    mixed.raw_input_contents.append(data)
    assert "has typed contents, but the request also uses raw_input_contents" in error(mixed)
