"""The model-side API on its own: what `import triton_python_backend_utils as pb_utils` offers."""

from __future__ import annotations

import json

import naiad_backend_python.model_side.pb_utils as naiad_utils
import numpy as np
import pytest
import triton_python_backend_utils as pb_utils


def test_triton_name_and_naiad_name_are_the_same_api():
    for name in naiad_utils.__all__:
        assert getattr(pb_utils, name) is getattr(naiad_utils, name)


def test_type_helpers_use_tritons_numbers():
    assert pb_utils.triton_string_to_numpy("TYPE_FP32") is np.float32
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    assert pb_utils.numpy_to_triton_type(np.float32) == 11
    assert pb_utils.numpy_to_triton_type(np.object_) == 13
    assert pb_utils.numpy_to_triton_type(np.bool_) == 1
    assert pb_utils.triton_to_numpy_type(9) is np.int64
    assert pb_utils.triton_to_numpy_type(13) is np.object_


def test_bytes_serialization_round_trip():
    values = np.array([b"a", b"", "\u00e9".encode(), b"\x00\x01"], dtype=np.object_)
    packed = pb_utils.serialize_byte_tensor(values)
    assert packed[:4] == (1).to_bytes(4, "little") and packed[4:5] == b"a"
    assert list(pb_utils.deserialize_bytes_tensor(packed)) == list(values)
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)) == ()


def test_tensor_infers_datatype_and_converts_strings():
    assert pb_utils.Tensor("x", np.zeros(3, dtype=np.float16)).triton_dtype() == 10
    text = pb_utils.Tensor("s", np.array(["ab", "c"]))
    assert text.triton_dtype() == 13
    assert list(text.as_numpy()) == [b"ab", b"c"]
    assert pb_utils.Tensor("x", np.zeros((2, 3), dtype=np.int8)).shape() == (2, 3)
    with pytest.raises(pb_utils.TritonModelException):
        pb_utils.Tensor("bad", np.zeros(2, dtype=np.complex64))


def test_dlpack_round_trip_with_torch():
    torch = pytest.importorskip("torch")
    source = pb_utils.Tensor("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    as_torch = torch.utils.dlpack.from_dlpack(source.to_dlpack())
    assert as_torch.shape == (2, 3) and float(as_torch.sum()) == 15.0
    from_capsule = pb_utils.Tensor.from_dlpack("c", torch.utils.dlpack.to_dlpack(torch.ones(3)))
    np.testing.assert_array_equal(from_capsule.as_numpy(), [1, 1, 1])
    bf16 = pb_utils.Tensor.from_dlpack("b", torch.tensor([1.0, -2.0], dtype=torch.bfloat16))
    assert bf16.triton_dtype() == 14  # BF16, carried as its 16-bit words
    assert list(bf16.as_numpy()) == [0x3F80, 0xC000]
    back = pb_utils.Tensor.from_dlpack("y", torch.arange(4, dtype=torch.int64))
    assert back.name() == "y" and back.triton_dtype() == 9
    np.testing.assert_array_equal(back.as_numpy(), [0, 1, 2, 3])


def test_triton_error_codes_and_messages():
    error = pb_utils.TritonError("nope", pb_utils.TritonError.NOT_FOUND)
    assert error.message() == "nope" and error.code() == 2 and str(error) == "nope"
    assert pb_utils.TritonError("default").code() == pb_utils.TritonError.INTERNAL
    assert [pb_utils.TritonError.UNKNOWN, pb_utils.TritonError.CANCELLED] == [0, 7]


def test_response_and_lookup_helpers():
    out = pb_utils.Tensor("OUT", np.ones(2, dtype=np.int32))
    response = pb_utils.InferenceResponse(output_tensors=[out], parameters={"k": 1})
    assert pb_utils.get_output_tensor_by_name(response, "OUT") is out
    assert pb_utils.get_output_tensor_by_name(response, "MISSING") is None
    assert json.loads(response.parameters()) == {"k": 1}
    assert not response.has_error()
    with pytest.raises(TypeError):  # as Triton's binding: a tensor where a list belongs
        pb_utils.InferenceResponse(output_tensors=out)
    config = {
        "input": [{"name": "A", "data_type": "TYPE_FP32"}],
        "output": [{"name": "B"}],
        "model_transaction_policy": {"decoupled": True},
    }
    assert pb_utils.get_input_config_by_name(config, "A")["data_type"] == "TYPE_FP32"
    assert pb_utils.get_output_config_by_name(config, "A") is None
    assert pb_utils.using_decoupled_model_transaction_policy(config)
    assert not pb_utils.using_decoupled_model_transaction_policy({})


def test_bls_outside_a_model_is_a_clear_error():
    request = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="only be made while the model is loaded"):
        request.exec()


def test_auto_complete_config_rules():
    config = pb_utils.ModelConfig(
        {"name": "m", "max_batch_size": 0, "input": [{"name": "A", "data_type": "TYPE_FP32", "dims": [2]}]}
    )
    config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2]})
    with pytest.raises(
        ValueError, match="configuration expects datatype TYPE_FP32 for input .A., model provides TYPE_INT32"
    ):
        config.add_input({"name": "A", "data_type": "TYPE_INT32", "dims": [2]})
    with pytest.raises(ValueError, match="contains property other than"):
        config.add_output({"name": "B", "data_type": "TYPE_FP32", "dims": [2], "shape": [1]})
    config.set_max_batch_size(8)
    with pytest.raises(ValueError):
        config.set_max_batch_size(4)
    config.set_model_transaction_policy({"decoupled": True})
    assert config.as_dict()["model_transaction_policy"] == {"decoupled": True}
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2


def test_response_iterator_works_with_for_and_async_for():
    import asyncio
    import threading

    from naiad_backend_python.model_side.response_iterator import ResponseIterator

    def feed(iterator: ResponseIterator) -> None:
        for i in range(3):
            iterator.put(pb_utils.InferenceResponse([pb_utils.Tensor("X", np.array([i]))]), final=(i == 2))

    blocking = ResponseIterator()
    threading.Thread(target=feed, args=(blocking,)).start()
    assert [int(r.output_tensors()[0].as_numpy()[0]) for r in blocking] == [0, 1, 2]

    async def consume() -> list[int]:
        iterator = ResponseIterator()
        threading.Thread(target=feed, args=(iterator,)).start()
        return [int(r.output_tensors()[0].as_numpy()[0]) async for r in iterator]

    assert asyncio.run(consume()) == [0, 1, 2]


def test_string_arguments_take_bytes_as_tritons_stub_does():
    assert pb_utils.Tensor(b"OUT", np.zeros(1)).name() == "OUT"
    request = pb_utils.InferenceRequest(
        model_name=b"add_sub", request_id=b"r1", inputs=[], requested_output_names=[b"OUTPUT0"]
    )
    assert (request.model_name(), request.request_id(), request.requested_output_names()) == (
        "add_sub",
        "r1",
        ["OUTPUT0"],
    )
    assert pb_utils.TritonError(b"bad input", pb_utils.TritonError.INVALID_ARG).message() == "bad input"
    assert pb_utils.ModelConfig(b'{"name": "m"}').as_dict() == {"name": "m"}
    with pytest.raises(pb_utils.TritonModelException, match="Correlation ID must be integer or string"):
        pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[], correlation_id=b"7")
    with pytest.raises(TypeError, match="Tensor name must be a str"):
        pb_utils.Tensor(7, np.zeros(1))
    with pytest.raises(pb_utils.TritonModelException, match="UTF-8"):
        pb_utils.Tensor(b"\xff", np.zeros(1))


def test_memory_types_and_log_levels_have_tritons_values():
    assert (pb_utils.TRITONSERVER_MEMORY_GPU, pb_utils.TRITONSERVER_MEMORY_CPU) == (0, 1)
    assert [int(level) for level in pb_utils.Logger.LogLevel] == [0, 1, 2, 3]
    assert pb_utils.Logger.VERBOSE is pb_utils.Logger.LogLevel.VERBOSE


def test_arguments_of_the_wrong_type_are_refused_as_tritons_binding_refuses_them():
    """Triton's argument_validation model: the wrong type is a TypeError, a None among the
    tensors a TritonModelException; omitted arguments keep their defaults."""
    tensor = pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))
    good = {"model_name": "m", "inputs": [tensor], "requested_output_names": ["OUT"]}
    with pytest.raises(pb_utils.TritonModelException):
        pb_utils.InferenceRequest(**{**good, "inputs": [None]})
    for name, value in [
        ("inputs", None),
        ("model_name", None),
        ("requested_output_names", [None]),
        ("requested_output_names", None),
        ("correlation_id", None),
        ("request_id", None),
        ("model_version", None),
        ("flags", None),
    ]:
        with pytest.raises(TypeError):
            pb_utils.InferenceRequest(**{**good, name: value})
    assert pb_utils.InferenceRequest(**good).correlation_id() == 0
    assert pb_utils.InferenceRequest(**good, correlation_id="seq-5").correlation_id() == "seq-5"
    pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])

    with pytest.raises(pb_utils.TritonModelException):
        pb_utils.InferenceResponse(output_tensors=[None])
    with pytest.raises(TypeError):
        pb_utils.InferenceResponse(output_tensors=None)
    assert pb_utils.InferenceResponse(output_tensors=[]).output_tensors() == []
    assert pb_utils.InferenceResponse(error=pb_utils.TritonError("e")).has_error()

    for name, data in [(None, np.zeros(1)), ("OUTPUT0", None), ("", None)]:
        with pytest.raises(TypeError):
            pb_utils.Tensor(name, data)
    for name in ("OUTPUT0", ""):
        with pytest.raises(pb_utils.TritonModelException):
            pb_utils.Tensor.from_dlpack(name, None)

    logger = pb_utils.Logger
    for call in (
        lambda: logger.log("bad level", None),
        lambda: logger.log("bad level", 1),
        lambda: logger.log_info(None),
        lambda: logger.log_warn(None),
        lambda: logger.log_error(None),
        lambda: logger.log_verbose(None),
    ):
        with pytest.raises(TypeError):
            call()
    logger.log("level left out")
    logger.log("a level", logger.WARNING)
