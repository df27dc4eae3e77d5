"""ModelInfer through tritonclient.grpc (sync and aio) on a real socket: answers, every
kind of bad input with its status and message, typed contents, BYTES, shared memory."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.grpc.aio as tga
import tritonclient.utils.shared_memory as shm
from grpc_servers import expect_error
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.full((2, 4), 0.5, dtype=np.float32)


def add_sub_inputs(a=A, b=B, names=("INPUT0", "INPUT1"), datatypes=("FP32", "FP32")):
    inputs = []
    for name, array, datatype in zip(names, (a, b), datatypes):
        tensor = tg.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


@pytest.fixture(scope="module")
def client(url):
    with tg.InferenceServerClient(url) as c:
        yield c


@pytest.fixture(scope="module")
def stub(url):
    with grpc.insecure_channel(url) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def test_add_sub(client):
    result = client.infer("add_sub", add_sub_inputs(), request_id="req-1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "req-1")
    # Outputs travel as raw bytes, one raw_output_contents entry per output.
    assert len(response.raw_output_contents) == 2 and not response.outputs[0].HasField("contents")


def test_requested_outputs_in_order_asked(client):
    outputs = [tg.InferRequestedOutput("OUTPUT1")]
    result = client.infer("add_sub", add_sub_inputs(), outputs=outputs)
    assert [o.name for o in result.get_response().outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


def test_aio_client(url):
    async def go():
        async with tga.InferenceServerClient(url) as client:
            assert await client.is_server_live()
            result = await client.infer("add_sub", add_sub_inputs())
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), A + B)
            with pytest.raises(InferenceServerException) as info:
                await client.infer("nope", add_sub_inputs())
            assert info.value.status() == "StatusCode.NOT_FOUND"

    asyncio.run(go())


def test_bytes_tensor(client):
    data = np.array([b"a", b"", "\u00e9t\u00e9".encode(), b"\x00\xff"], dtype=object)
    tensor = tg.InferInput("INPUT0", [4], "BYTES")
    tensor.set_data_from_numpy(data)
    result = client.infer("identity_bytes", [tensor])
    assert result.as_numpy("OUTPUT0").tolist() == data.tolist()
    # Triton's length-prefixed encoding on the wire.
    assert (
        result.get_response().raw_output_contents[0]
        == b"\x01\0\0\0a\0\0\0\0\x05\0\0\0\xc3\xa9t\xc3\xa9\x02\0\0\0\x00\xff"
    )


def test_zero_element_tensor(client):
    tensor = tg.InferInput("INPUT0", [0], "FP32")
    tensor.set_data_from_numpy(np.zeros(0, np.float32))
    result = client.infer("identity", [tensor])
    assert result.as_numpy("OUTPUT0").shape == (0,)


def _raw_request(model="add_sub", **kw) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model, **kw)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype="FP32", shape=[1, 4])
    return request


def test_typed_contents(stub):
    request = _raw_request()
    request.inputs[0].contents.fp32_contents.extend([1, 2, 3, 4])
    request.inputs[1].contents.fp32_contents.extend([1, 1, 1, 1])
    response = stub.ModelInfer(request)
    out = np.frombuffer(response.raw_output_contents[0], np.float32)
    np.testing.assert_array_equal(out, [2, 3, 4, 5])

    ints = service_pb2.ModelInferRequest(model_name="identity_int")
    ints.inputs.add(name="INPUT0", datatype="INT32", shape=[3]).contents.int_contents.extend([-1, 0, 7])
    response = stub.ModelInfer(ints)
    np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], np.int32), [-1, 0, 7])

    strings = service_pb2.ModelInferRequest(model_name="identity_bytes")
    strings.inputs.add(name="INPUT0", datatype="BYTES", shape=[2]).contents.bytes_contents.extend([b"x", b"yz"])
    response = stub.ModelInfer(strings)
    assert response.raw_output_contents[0] == b"\x01\0\0\0x\x02\0\0\0yz"


def _stub_error(stub, request, status: grpc.StatusCode, *fragments: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request)
    assert info.value.code() == status, info.value.details()
    for fragment in fragments:
        assert fragment in info.value.details(), info.value.details()


def test_malformed_requests(stub):
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    raw = np.ones(4, np.float32).tobytes()

    short = _raw_request()
    short.raw_input_contents.extend([raw, raw[:-4]])
    _stub_error(
        stub, short, invalid, "input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 16, got 12"
    )

    missing_raw = _raw_request()
    missing_raw.raw_input_contents.append(raw)
    _stub_error(stub, missing_raw, invalid, "'INPUT1'", "carries no data")

    extra_raw = _raw_request()
    extra_raw.raw_input_contents.extend([raw, raw, raw])
    _stub_error(stub, extra_raw, invalid, "3 raw_input_contents entries", "only 2")

    mixed = _raw_request()
    mixed.inputs[0].contents.fp32_contents.extend([1, 2, 3, 4])
    mixed.raw_input_contents.append(raw)
    _stub_error(stub, mixed, invalid, "'INPUT0'", "typed contents", "raw_input_contents")

    wrong_field = _raw_request()
    for tensor in wrong_field.inputs:
        tensor.contents.int_contents.extend([1, 2, 3, 4])
    _stub_error(stub, wrong_field, invalid, "'INPUT0'", "fp32_contents", "int_contents")

    too_few = _raw_request()
    too_few.inputs[0].contents.fp32_contents.extend([1, 2, 3])
    too_few.inputs[1].contents.fp32_contents.extend([1, 2, 3, 4])
    _stub_error(stub, too_few, invalid, "'INPUT0'", "3 elements", "needs 4")

    bad_datatype = _raw_request()
    bad_datatype.inputs[0].datatype = "FLOAT"
    bad_datatype.raw_input_contents.extend([raw, raw])
    _stub_error(stub, bad_datatype, invalid, "unknown datatype 'FLOAT'")

    negative = _raw_request()
    negative.inputs[0].shape[1] = -4
    negative.raw_input_contents.extend([raw, raw])
    _stub_error(stub, negative, invalid, "negative dimension", "[1, -4]")

    truncated = service_pb2.ModelInferRequest(model_name="identity_bytes")
    truncated.inputs.add(name="INPUT0", datatype="BYTES", shape=[2])
    truncated.raw_input_contents.append(b"\x05\0\0\0ab")
    _stub_error(stub, truncated, invalid, "'INPUT0'", "BYTES data ends inside an element")

    bad_timeout = _raw_request()
    bad_timeout.raw_input_contents.extend([raw, raw])
    bad_timeout.parameters["timeout"].string_param = "soon"
    _stub_error(stub, bad_timeout, invalid, "'timeout' must be an integer")

    fp16_typed = service_pb2.ModelInferRequest(model_name="identity")
    fp16_typed.inputs.add(name="INPUT0", datatype="FP16", shape=[1]).contents.fp32_contents.append(1)
    _stub_error(stub, fp16_typed, invalid, "FP16 has no typed contents field")


def test_bad_inputs_of_the_http_issue(client):
    """The bad inputs every frontend must refuse the same way, with clear messages."""
    expect_error(
        lambda: client.infer("nope", add_sub_inputs()), "NOT_FOUND", "Request for unknown model: 'nope' is not found"
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(), model_version="7"),
        "NOT_FOUND",
        "Request for unknown model: 'add_sub' version 7 is not found",
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(), model_version="x"),
        "INVALID_ARGUMENT",
        "failed to get model version from specified version string 'x', version should be an integral value > 0",
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(names=("INPUT0", "INPUTX"))),
        "INVALID_ARGUMENT",
        "unexpected inference input 'INPUTX'",
        "'add_sub'",
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs()[:1]),
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) "
        "['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s).",
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(names=("INPUT0", "INPUT0"))),
        "INVALID_ARGUMENT",
        "input 'INPUT0' already exists in request",
    )
    ints = np.ones((2, 4), np.int32)
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(b=ints, datatypes=("FP32", "INT32"))),
        "INVALID_ARGUMENT",
        "'INPUT1' data-type is 'INT32'",
        "expects 'FP32'",
    )
    narrow = np.ones((2, 3), np.float32)
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(a=narrow, b=narrow)),
        "INVALID_ARGUMENT",
        "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [2,3].",
    )
    big = np.ones((9, 4), np.float32)
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(a=big, b=big)),
        "INVALID_ARGUMENT",
        "batch-size must be <= 8",
        "9",
    )
    expect_error(
        lambda: client.infer("add_sub", add_sub_inputs(), outputs=[tg.InferRequestedOutput("NOPE")]),
        "INVALID_ARGUMENT",
        "unexpected inference output 'NOPE'",
    )
    expect_error(lambda: client.infer("failing", [_fp32("INPUT0", [1.0])]), "INTERNAL", "failed on purpose")
    # ...and the server keeps serving.
    np.testing.assert_array_equal(client.infer("add_sub", add_sub_inputs()).as_numpy("OUTPUT0"), A + B)


def _fp32(name, values):
    tensor = tg.InferInput(name, [len(values)], "FP32")
    tensor.set_data_from_numpy(np.array(values, np.float32))
    return tensor


def test_decoupled_model_refused_on_unary_infer(client):
    tensor = tg.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([3], np.int32))
    expect_error(lambda: client.infer("repeat", [tensor]), "UNIMPLEMENTED", "decoupled", "ModelStreamInfer")


def test_compressed_request_and_response(client):
    for algorithm in ("gzip", "deflate"):
        result = client.infer("add_sub", add_sub_inputs(), compression_algorithm=algorithm)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)


def test_system_shared_memory_inputs_and_outputs(client):
    suffix = uuid.uuid4().hex[:8]
    in_key, out_key = f"/naiad_in_{suffix}", f"/naiad_out_{suffix}"
    region_in = shm.create_shared_memory_region(f"in_{suffix}", in_key, 64)
    region_out = shm.create_shared_memory_region(f"out_{suffix}", out_key, 64)
    try:
        values = np.arange(4, dtype=np.float32) + 10
        shm.set_shared_memory_region(region_in, [values])
        client.register_system_shared_memory("in", in_key, 64)
        client.register_system_shared_memory("out", out_key, 32, offset=16)
        status = client.get_system_shared_memory_status()
        assert {name: (r.key, r.offset, r.byte_size) for name, r in status.regions.items()} == {
            "in": (in_key, 0, 64),
            "out": (out_key, 16, 32),
        }
        assert list(client.get_system_shared_memory_status("out").regions) == ["out"]

        tensor = tg.InferInput("INPUT0", [4], "FP32")
        tensor.set_shared_memory("in", 16)
        output = tg.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("out", 16, offset=8)
        result = client.infer("identity", [tensor], outputs=[output])
        # The output went into the region (16 + 8 bytes into the file), not the message.
        assert result.get_response().raw_output_contents == [b""]
        np.testing.assert_array_equal(shm.get_contents_as_numpy(region_out, np.float32, [10])[6:], values)

        small = tg.InferRequestedOutput("OUTPUT0")
        small.set_shared_memory("out", 8)
        expect_error(
            lambda: client.infer("identity", [tensor], outputs=[small]),
            "INVALID_ARGUMENT",
            "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at "
            "least 16 bytes to hold the results",
        )
        outside = tg.InferInput("INPUT0", [4], "FP32")
        outside.set_shared_memory("in", 16, offset=56)
        expect_error(
            lambda: client.infer("identity", [outside]),
            "INVALID_ARGUMENT",
            "Invalid offset + byte size for shared memory region: 'in'",
        )
        unknown = tg.InferInput("INPUT0", [4], "FP32")
        unknown.set_shared_memory("nope", 16)
        expect_error(lambda: client.infer("identity", [unknown]), "NOT_FOUND", "'nope'")
        expect_error(lambda: client.register_system_shared_memory("in", in_key, 64), "ALREADY_EXISTS", "'in'")
        expect_error(
            lambda: client.register_system_shared_memory("x", f"/no_such_{suffix}", 64),
            "INVALID_ARGUMENT",
            f"Unable to open shared memory region: '/no_such_{suffix}'",
        )
        expect_error(lambda: client.get_system_shared_memory_status("nope"), "NOT_FOUND", "'nope'")

        client.unregister_system_shared_memory("in")
        assert list(client.get_system_shared_memory_status().regions) == ["out"]
        client.unregister_system_shared_memory()
        assert not client.get_system_shared_memory_status().regions
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(region_in)
        shm.destroy_shared_memory_region(region_out)


def test_request_parameters_reach_the_model(client):
    import json

    tensor = _fp32("INPUT0", [1.0])
    result = client.infer(
        "parameters",
        [tensor],
        parameters={"flag": True, "count": 3, "ratio": 0.5, "name": "x"},
        sequence_id=0,
        priority=0,
    )
    assert json.loads(result.as_numpy("OUTPUT0")[0]) == {"count": 3, "flag": True, "name": "x", "ratio": 0.5}


def test_messages_over_grpc_default_limit(client):
    """grpcio refuses messages over 4 MiB unless told otherwise; naiad's default limit is
    Triton's (2 GiB), so a 6 MB tensor goes through both ways."""
    values = np.arange(1_500_000, dtype=np.float32)
    result = client.infer("identity", [_fp32("INPUT0", values)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)
