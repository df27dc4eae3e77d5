"""The pure message translation, for every datatype, without a socket: what tritonclient
builds decodes to the right arrays, and what naiad encodes reads back through
tritonclient's InferResult."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as tg
from tritonclient.grpc import service_pb2 as triton_pb
from tritonclient.grpc._infer_result import InferResult
from tritonclient.grpc._utils import _get_inference_request

from naiad import ErrorCode, InferenceResponse, NaiadError, Tensor
from naiad.frontends.grpc import codec
from naiad.frontends.kserve.repository_requests import LoadRequest
from naiad.protos import grpc_service_pb2 as pb

ARRAYS = {
    "BOOL": np.array([[True, False, True]]),
    "UINT8": np.array([[0, 7, 255]], np.uint8),
    "UINT16": np.array([[0, 7, 65535]], np.uint16),
    "UINT32": np.array([[0, 7, 2**32 - 1]], np.uint32),
    "UINT64": np.array([[0, 7, 2**64 - 1]], np.uint64),
    "INT8": np.array([[-128, 0, 127]], np.int8),
    "INT16": np.array([[-32768, 0, 32767]], np.int16),
    "INT32": np.array([[-(2**31), 0, 2**31 - 1]], np.int32),
    "INT64": np.array([[-(2**63), 0, 2**63 - 1]], np.int64),
    "FP16": np.array([[-1.5, 0, 65504]], np.float16),
    "FP32": np.array([[-1.5, 0, 3.25e38]], np.float32),
    "FP64": np.array([[-1.5, 0, 1e308]], np.float64),
    "BYTES": np.array([[b"", b"abc", b"\x00\xff"]], dtype=object),
}


def _to_ours(message) -> pb.ModelInferRequest:
    """tritonclient's message, re-read as naiad's (same wire format, another pool)."""
    return pb.ModelInferRequest.FromString(message.SerializeToString())


def _client_request(datatype: str, array: np.ndarray, **kw):
    tensor = tg.InferInput("INPUT0", list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    request = _get_inference_request(
        model_name="m",
        inputs=[tensor],
        model_version="",
        request_id="r",
        outputs=None,
        sequence_id=0,
        sequence_start=False,
        sequence_end=False,
        priority=0,
        timeout=None,
        parameters=kw or None,
    )
    return _to_ours(request)


@pytest.mark.parametrize("datatype", sorted(ARRAYS))
def test_raw_round_trip(datatype):
    array = ARRAYS[datatype]
    request = codec.decode_infer_request(_client_request(datatype, array))
    (tensor,) = request.inputs
    assert (tensor.name, tensor.datatype, tensor.shape) == ("INPUT0", datatype, (1, 3))
    assert tensor.data.tolist() == array.tolist()
    if datatype != "BYTES":
        assert tensor.data.dtype == array.dtype and not tensor.data.flags.owndata  # a view of the message bytes

    response = InferenceResponse("m", "1", "r", outputs=[Tensor("OUTPUT0", datatype, (1, 3), tensor.data)])
    encoded = codec.encode_infer_response(response)
    result = InferResult(triton_pb.ModelInferResponse.FromString(encoded.SerializeToString()))
    assert result.as_numpy("OUTPUT0").tolist() == array.tolist()


def test_bf16_words_round_trip():
    words = np.array([0x3F80, 0xC000, 0x0000], np.uint16)  # 1.0, -2.0, 0.0
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="X", datatype="BF16", shape=[3])
    message.raw_input_contents.append(words.tobytes())
    (tensor,) = codec.decode_infer_request(message).inputs
    assert tensor.data.tolist() == words.tolist()
    encoded = codec.encode_infer_response(InferenceResponse(outputs=[Tensor("Y", "BF16", (3,), tensor.data)]))
    assert encoded.raw_output_contents[0] == words.tobytes()


@pytest.mark.parametrize(
    "datatype,field,values",
    [
        ("BOOL", "bool_contents", [True, False]),
        ("INT8", "int_contents", [-3, 4]),
        ("UINT16", "uint_contents", [3, 65535]),
        ("INT64", "int64_contents", [-(2**40), 5]),
        ("UINT64", "uint64_contents", [2**63, 1]),
        ("FP32", "fp32_contents", [0.5, -2.0]),
        ("FP64", "fp64_contents", [0.25, 1e300]),
        ("BYTES", "bytes_contents", [b"a", b""]),
    ],
)
def test_typed_contents(datatype, field, values):
    message = pb.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="X", datatype=datatype, shape=[2])
    getattr(tensor.contents, field).extend(values)
    (decoded,) = codec.decode_infer_request(message).inputs
    assert decoded.data.tolist() == values
    assert decoded.data.dtype == (object if datatype == "BYTES" else ARRAYS[datatype].dtype)


def test_typed_value_out_of_range():
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="X", datatype="UINT8", shape=[1]).contents.uint_contents.append(300)
    with pytest.raises(NaiadError) as info:
        codec.decode_infer_request(message)
    assert info.value.code is ErrorCode.INVALID_ARG and "'X'" in info.value.message


@pytest.mark.parametrize("typed", [False, True])
def test_a_shape_with_more_dimensions_than_a_tensor_may_have_is_refused(typed):
    """1000 dimensions of 0 hold no elements, so the data matched; numpy then refused the
    reshape and the request failed as INTERNAL (found by tests/security/test_fuzz.py)."""
    message = pb.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="INPUT0", datatype="FP32", shape=[0] * 1000)
    if typed:
        tensor.contents.fp32_contents.extend([])
        tensor.contents.SetInParent()
    else:
        message.raw_input_contents.append(b"")
    with pytest.raises(NaiadError) as info:
        codec.decode_infer_request(message)
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message == "input 'INPUT0' for model 'm': shape has 1000 dimensions; a tensor has at most 32"


def test_parameters_round_trip():
    request = codec.decode_infer_request(_client_request("FP32", ARRAYS["FP32"], flag=True, n=-3, x=0.5, s="hi"))
    assert request.parameters == {"flag": True, "n": -3, "x": 0.5, "s": "hi"}
    assert request.id == "r" and request.model_name == "m"
    target = pb.ModelInferResponse()
    codec.encode_parameters(
        {"big": 2**64 - 1, "np": np.int32(4), "f": np.float32(0.5), "obj": object()}, target.parameters
    )
    assert codec.decode_parameters(target.parameters) == {"big": 2**64 - 1, "np": 4, "f": 0.5}


def test_requested_output_parameters_pass_through():
    output = tg.InferRequestedOutput("OUTPUT0", class_count=3)
    tensor = tg.InferInput("INPUT0", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, np.float32))
    message = _to_ours(
        _get_inference_request(
            model_name="m",
            inputs=[tensor],
            model_version="2",
            request_id="",
            outputs=[output],
            sequence_id=0,
            sequence_start=False,
            sequence_end=False,
            priority=0,
            timeout=None,
            parameters=None,
        )
    )
    request = codec.decode_infer_request(message)
    assert request.model_version == "2"
    assert [(o.name, o.parameters) for o in request.outputs] == [("OUTPUT0", {"classification": 3})]


def test_load_request():
    parameters = pb.RepositoryModelLoadRequest().parameters
    assert codec.load_request("m", parameters) == LoadRequest("m", None, {})
    parameters["config"].string_param = '{"max_batch_size": 4}'
    parameters["file:1/model.onnx"].bytes_param = b"onnx"
    assert codec.load_request("m", parameters) == LoadRequest("m", {"max_batch_size": 4}, {"1/model.onnx": b"onnx"})
