"""The ONNX Runtime backend served through the in-process naiad.Server: outputs equal
onnxruntime run directly on the same inputs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import onnx_models
import onnxruntime as ort
import pytest
from onnx import TensorProto

from naiad import ErrorCode, InferenceRequest, NaiadError, RequestedOutput, Tensor

ADD_SUB_CONFIG = """
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

MLP_CONFIG = """
backend: "onnxruntime"
max_batch_size: 64
input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 8 ] },
         { name: "logits" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


def request(model: str, outputs: list[str] = (), **arrays: np.ndarray) -> InferenceRequest:  # type: ignore[assignment]
    return InferenceRequest(
        model,
        [Tensor.from_numpy(name, array) for name, array in arrays.items()],
        outputs=[RequestedOutput(name) for name in outputs],
    )


def test_entry_point_registers_onnxruntime():
    names = {ep.name: ep.value for ep in entry_points(group="naiad.backends")}
    assert names.get("onnxruntime") == "naiad_backend_onnx.plugin"


def test_add_sub_matches_onnxruntime(tmp_path):
    model = onnx_models.add_sub()
    onnx_models.write_model(tmp_path, "add_sub", model, ADD_SUB_CONFIG)
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    expected = ort.InferenceSession(model).run(None, {"INPUT0": a, "INPUT1": b})

    async def body(server):
        response = await server.infer(request("add_sub", INPUT0=a, INPUT1=b))
        only_sub = await server.infer(request("add_sub", ["OUTPUT1"], INPUT0=a, INPUT1=b))
        return response, only_sub, server.model_metadata("add_sub")

    response, only_sub, metadata = onnx_models.serve(tmp_path, body)
    np.testing.assert_array_equal(response.output("OUTPUT0").data, expected[0])
    np.testing.assert_array_equal(response.output("OUTPUT1").data, expected[1])
    assert [t.name for t in only_sub.outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(only_sub.outputs[0].data, expected[1])
    assert metadata["platform"] == "onnxruntime_onnx"


def test_mlp_concurrent_requests_match_onnxruntime(tmp_path):
    model = onnx_models.mlp()
    onnx_models.write_model(tmp_path, "mlp", model, MLP_CONFIG)
    session = ort.InferenceSession(model)
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((n, 16)).astype(np.float32) for n in (1, 5, 64, 2)]

    async def body(server):
        return await asyncio.gather(*(server.infer(request("mlp", input=x)) for x in batches))

    responses = onnx_models.serve(tmp_path, body)
    for x, response in zip(batches, responses):
        probabilities, logits = session.run(["probabilities", "logits"], {"input": x})
        np.testing.assert_allclose(response.output("probabilities").data, probabilities, rtol=1e-6)
        np.testing.assert_allclose(response.output("logits").data, logits, rtol=1e-6)
        assert response.output("logits").shape == (len(x), 8)


NUMERIC = [
    ("BOOL", TensorProto.BOOL, np.bool_),
    ("UINT8", TensorProto.UINT8, np.uint8),
    ("UINT16", TensorProto.UINT16, np.uint16),
    ("UINT32", TensorProto.UINT32, np.uint32),
    ("UINT64", TensorProto.UINT64, np.uint64),
    ("INT8", TensorProto.INT8, np.int8),
    ("INT16", TensorProto.INT16, np.int16),
    ("INT32", TensorProto.INT32, np.int32),
    ("INT64", TensorProto.INT64, np.int64),
    ("FP16", TensorProto.FLOAT16, np.float16),
    ("FP32", TensorProto.FLOAT, np.float32),
    ("FP64", TensorProto.DOUBLE, np.float64),
    ("BF16", TensorProto.BFLOAT16, np.uint16),  # carried as uint16 words
]


def test_every_numeric_datatype_round_trips(tmp_path):
    # No configs: auto-complete fills each model's types from the file.
    for datatype, elem_type, _ in NUMERIC:
        onnx_models.write_model(tmp_path, f"identity_{datatype.lower()}", onnx_models.identity(elem_type))
    rng = np.random.default_rng(4)

    async def body(server):
        results = {}
        for datatype, _, dtype in NUMERIC:
            data = (rng.standard_normal((2, 3)) * 100).astype(dtype)
            tensor = Tensor("INPUT0", datatype, data.shape, data)
            response = await server.infer(InferenceRequest(f"identity_{datatype.lower()}", [tensor]))
            config = server.model_config(f"identity_{datatype.lower()}")
            results[datatype] = (data, response.output("OUTPUT0"), config.inputs[0].datatype)
        return results

    results = onnx_models.serve(tmp_path, body)
    for datatype, (data, output, configured) in results.items():
        assert configured == datatype
        assert output.datatype == datatype
        assert output.data.dtype == data.dtype
        np.testing.assert_array_equal(output.data, data)


def test_string_tensors_travel_as_bytes(tmp_path):
    model = onnx_models.string_join()
    onnx_models.write_model(tmp_path, "join", model)
    words = np.array([[b"alpha", "\u00e9t\u00e9".encode()], [b"", b"x"]], dtype=object)
    expected = ort.InferenceSession(model).run(
        None, {"INPUT0": np.vectorize(lambda b: b.decode())(words).astype(object)}
    )[0]

    async def body(server):
        ok = await server.infer(request("join", INPUT0=words))
        with pytest.raises(NaiadError) as bad:
            await server.infer(request("join", INPUT0=np.array([[b"\xff\xfe", b"a"]], dtype=object)))
        return ok, bad.value, server.model_metadata("join")

    ok, bad, metadata = onnx_models.serve(tmp_path, body)
    output = ok.output("OUTPUT0")
    assert output.datatype == "BYTES"
    assert output.data.tolist() == [[s.encode() for s in row] for row in expected.tolist()]
    assert bad.code is ErrorCode.INVALID_ARG and "UTF-8" in bad.message
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "BYTES", "shape": [-1, 2]}]


def test_framework_shape_error_is_per_request_and_server_keeps_serving(tmp_path):
    # The config claims any width; the model only takes 4: onnxruntime itself refuses 5.
    model = onnx_models.add_sub()
    config = ADD_SUB_CONFIG.replace("dims: [ 4 ]", "dims: [ -1 ]")
    onnx_models.write_model(tmp_path, "add_sub", model, config)
    good = np.ones((1, 4), np.float32)
    bad = np.ones((1, 5), np.float32)

    async def body(server):
        with pytest.raises(NaiadError) as info:
            await server.infer(request("add_sub", INPUT0=bad, INPUT1=bad))
        after = await server.infer(request("add_sub", INPUT0=good, INPUT1=good))
        return info.value, after

    error, after = onnx_models.serve(tmp_path, body)
    assert error.code is ErrorCode.INVALID_ARG
    assert "onnxruntime rejected the input" in error.message and "Got: 5 Expected: 4" in error.message
    np.testing.assert_array_equal(after.output("OUTPUT0").data, good + good)


def test_config_that_contradicts_the_model_fails_the_load_with_a_reason(tmp_path):
    onnx_models.write_model(
        tmp_path, "wrong_type", onnx_models.add_sub(), ADD_SUB_CONFIG.replace("TYPE_FP32", "TYPE_INT32", 1)
    )
    onnx_models.write_model(tmp_path, "wrong_name", onnx_models.add_sub(), ADD_SUB_CONFIG.replace('"INPUT1"', '"B"'))
    onnx_models.write_model(
        tmp_path,
        "bad_threads",
        onnx_models.add_sub(),
        ADD_SUB_CONFIG + 'parameters { key: "intra_op_thread_count" value { string_value: "many" } }',
    )

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = onnx_models.serve(tmp_path, body)
    assert index["wrong_type"]["state"] == "UNAVAILABLE"
    assert "input 'INPUT0'" in index["wrong_type"]["reason"] and "INT32" in index["wrong_type"]["reason"]
    assert "unexpected inference input 'B', allowed inputs are: INPUT0, INPUT1" in index["wrong_name"]["reason"]
    assert "parameters.intra_op_thread_count" in index["bad_threads"]["reason"]


def test_session_parameters_and_graph_level_are_accepted(tmp_path):
    config = (
        ADD_SUB_CONFIG
        + """
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
parameters { key: "inter_op_thread_count" value { string_value: "1" } }
parameters { key: "execution_mode" value { string_value: "1" } }
optimization { graph { level: -1 } }
"""
    )
    onnx_models.write_model(tmp_path, "tuned", onnx_models.add_sub(), config)
    a = np.full((2, 4), 3, np.float32)

    async def body(server):
        return await server.infer(request("tuned", INPUT0=a, INPUT1=a))

    response = onnx_models.serve(tmp_path, body)
    np.testing.assert_array_equal(response.output("OUTPUT1").data, np.zeros((2, 4), np.float32))


def test_model_directory_with_external_data(tmp_path):
    import onnx

    proto = onnx.load_from_string(onnx_models.mlp())
    directory = tmp_path / "mlp" / "1" / "model.onnx"
    directory.mkdir(parents=True)
    onnx.save_model(
        proto,
        str(directory / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    assert (directory / "weights.bin").stat().st_size > 0
    x = np.ones((2, 16), np.float32)
    expected = ort.InferenceSession(onnx_models.mlp()).run(["logits"], {"input": x})[0]

    async def body(server):
        return await server.infer(request("mlp", ["logits"], input=x))

    response = onnx_models.serve(tmp_path, body)
    np.testing.assert_allclose(response.output("logits").data, expected, rtol=1e-6)


def test_global_thread_pool_backend_setting_serves_several_models(tmp_path):
    # ORT's global thread pools are process-wide and, once created, every later session in
    # the process must use them: run this server in its own process.
    for name in ("first", "second"):
        onnx_models.write_model(tmp_path, name, onnx_models.mlp())
    script = f"""
import numpy as np, onnx_models
from naiad import InferenceRequest, RequestedOutput, Tensor
settings = {{"onnxruntime": {{"enable-global-threadpool": "1", "intra_op_thread_count": "1"}}}}
async def body(server):
    x = np.ones((2, 16), np.float32)
    out = [await server.infer(InferenceRequest(n, [Tensor.from_numpy("input", x)], outputs=[RequestedOutput("logits")]))
           for n in ("first", "second")]
    assert np.array_equal(out[0].output("logits").data, out[1].output("logits").data)
    print("served", [r["state"] for r in server.repository_index()])
onnx_models.serve(__import__("pathlib").Path({str(tmp_path)!r}), body, backend_config=settings)
"""
    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": tests + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert done.returncode == 0, done.stderr
    assert "served ['READY', 'READY']" in done.stdout


def test_dynamic_batching_answers_every_request_with_its_own_rows(tmp_path):
    model = onnx_models.mlp()
    config = MLP_CONFIG.replace("count: 2", "count: 1") + "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    onnx_models.write_model(tmp_path, "mlp", model, config)
    session = ort.InferenceSession(model)
    rng = np.random.default_rng(7)
    batches = [rng.standard_normal((n, 16)).astype(np.float32) for n in (1, 3, 2, 1, 4, 1, 2, 2)]

    async def body(server):
        responses = await asyncio.gather(*(server.infer(request("mlp", ["logits"], input=x)) for x in batches))
        return responses, server.statistics("mlp")[0]

    responses, stats = onnx_models.serve(tmp_path, body)
    for x, response in zip(batches, responses):
        np.testing.assert_allclose(response.output("logits").data, session.run(["logits"], {"input": x})[0], rtol=1e-6)
    assert stats["inference_count"] == sum(len(x) for x in batches)


def test_missing_or_broken_model_file_fails_the_load_with_a_reason(tmp_path):
    (tmp_path / "missing" / "1").mkdir(parents=True)
    (tmp_path / "missing" / "config.pbtxt").write_text(ADD_SUB_CONFIG)
    onnx_models.write_model(tmp_path, "broken", b"not an onnx model", ADD_SUB_CONFIG)

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = onnx_models.serve(tmp_path, body)
    assert "model file not found" in index["missing"]["reason"] and "model.onnx" in index["missing"]["reason"]
    assert "onnxruntime cannot load model.onnx" in index["broken"]["reason"]


def test_a_backend_setting_that_is_not_a_boolean_fails_the_load_naming_it(tmp_path):
    """`enable-global-threadpool=maybe` once read as false: a setting the user changed was
    silently off. Now it fails the load, and the message names key and value."""
    onnx_models.write_model(tmp_path, "mlp", onnx_models.mlp(), MLP_CONFIG)

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = onnx_models.serve(tmp_path, body, backend_config={"onnxruntime": {"enable-global-threadpool": "maybe"}})
    assert index["mlp"]["state"] == "UNAVAILABLE"
    assert (
        "--backend-config onnxruntime,enable-global-threadpool: expected true or false (1/0, yes/no, on/off), "
        "got 'maybe'" in index["mlp"]["reason"]
    )
