"""Health, metadata, configuration, statistics, repository and shared-memory endpoints,
through tritonclient (sync) and raw HTTP."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from http_servers import MODELS, server_process, start_server, write_repository
from tritonclient.utils import InferenceServerException


def test_health(server, base_url):
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub") and client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("add_sub", "2")
    assert not client.is_model_ready("nosuch")
    response = httpx.get(base_url + "/v2/models/nosuch/ready")
    assert response.status_code == 400 and "nosuch" in response.json()["error"]
    assert httpx.get(base_url + "/v2/health/live").content == b""


def test_server_metadata(server):
    metadata = httpclient.InferenceServerClient(server.http_url).get_server_metadata()
    assert metadata["name"] == "triton" and metadata["version"]
    for extension in (
        "binary_tensor_data",
        "classification",
        "model_repository",
        "model_configuration",
        "system_shared_memory",
        "statistics",
        "parameters",
    ):
        assert extension in metadata["extensions"]


def test_model_metadata(server):
    client = httpclient.InferenceServerClient(server.http_url)
    expected = {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "numpy",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 4]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": [-1, 4]},
        ],
    }
    assert client.get_model_metadata("add_sub") == expected
    assert client.get_model_metadata("add_sub", "1") == expected
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("add_sub", "3")
    assert info.value.status() == "404" and "version 3" in info.value.message()


def test_model_config_is_tritons_json_form(server):
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("add_sub")
    assert config["name"] == "add_sub" and config["backend"] == "numpy"
    assert config["max_batch_size"] == 8
    # 64-bit integers are JSON numbers, as Triton writes them.
    assert config["input"][0] == {
        "name": "INPUT0",
        "data_type": "TYPE_FP32",
        "format": "FORMAT_NONE",
        "dims": [4],
        "is_shape_tensor": False,
        "allow_ragged_batch": False,
        "optional": False,
        "is_non_linear_format_io": False,
    }
    # The defaults Triton fills in at load.
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["instance_group"] == [
        {
            "name": "add_sub",
            "kind": "KIND_CPU",
            "count": 1,
            "gpus": [],
            "secondary_devices": [],
            "profile": [],
            "passive": False,
            "host_policy": "",
        }
    ]
    assert config["optimization"]["input_pinned_memory"] == {"enable": True}
    assert config["parameters"] == {"op": {"string_value": "add_sub"}}
    labelled = httpclient.InferenceServerClient(server.http_url).get_model_config("classify")
    assert labelled["output"][0]["label_filename"] == "labels.txt"


def test_statistics(server, base_url):
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("add_sub")["model_stats"][0]["inference_stats"]["success"]["count"]
    inputs = [httpclient.InferInput("INPUT0", [3, 4], "FP32"), httpclient.InferInput("INPUT1", [3, 4], "FP32")]
    for item in inputs:
        item.set_data_from_numpy(np.ones((3, 4), np.float32))
    client.infer("add_sub", inputs)
    stats = client.get_inference_statistics("add_sub", "1")["model_stats"]
    assert [(s["name"], s["version"]) for s in stats] == [("add_sub", "1")]
    entry = stats[0]
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert set(entry["inference_stats"][key]) == {"count", "ns"}
    assert entry["inference_stats"]["success"]["count"] == before + 1
    assert any(b["batch_size"] == 3 for b in entry["batch_stats"])
    assert entry["last_inference"] > 0 and "response_stats" in entry
    everything = client.get_inference_statistics()["model_stats"]
    assert {"add_sub", "types", "classify"} <= {s["name"] for s in everything}
    response = httpx.get(base_url + "/v2/models/nosuch/stats")
    assert response.status_code == 400 and "nosuch" in response.json()["error"]


def test_repository_index(server):
    index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    assert {"name": "add_sub", "version": "1", "state": "READY"} in index
    assert all("reason" not in row for row in index if row.get("state") == "READY")


def test_system_shared_memory_inputs_and_outputs(server):
    client = httpclient.InferenceServerClient(server.http_url)
    key = f"/naiad-test-{uuid.uuid4().hex[:8]}"
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 2, np.float32)
    handle = shm.create_shared_memory_region("io", key, 64 + 32)
    try:
        shm.set_shared_memory_region(handle, [a, b])
        client.register_system_shared_memory("io", key, 96)
        assert client.get_system_shared_memory_status() == [{"name": "io", "key": key, "offset": 0, "byte_size": 96}]
        assert client.get_system_shared_memory_status("io")[0]["name"] == "io"
        inputs = [httpclient.InferInput("INPUT0", [2, 4], "FP32"), httpclient.InferInput("INPUT1", [2, 4], "FP32")]
        inputs[0].set_shared_memory("io", 32)
        inputs[1].set_shared_memory("io", 32, offset=32)
        output = httpclient.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("io", 32, offset=64)
        plain = httpclient.InferRequestedOutput("OUTPUT1")
        result = client.infer("add_sub", inputs, outputs=[output, plain])
        described = result.get_output("OUTPUT0")
        # As Triton answers: the output described by name, datatype and shape only (a
        # `parameters` object there breaks Triton's C++ client, perf_analyzer).
        assert described == {"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 4]}
        np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.float32, [2, 4], offset=64), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)

        # An output region too small for the output is a clear 400.
        small = httpclient.InferRequestedOutput("OUTPUT0")
        small.set_shared_memory("io", 8, offset=64)
        with pytest.raises(
            InferenceServerException, match=r"'OUTPUT0' \(8 bytes\) should be at least 32 bytes"
        ) as info:
            client.infer("add_sub", inputs, outputs=[small])
        assert info.value.status() == "400"
        # Reading past the region is refused before the model runs.
        inputs[1].set_shared_memory("io", 32, offset=80)
        with pytest.raises(
            InferenceServerException, match=r"Invalid offset \+ byte size for shared memory region: 'io'"
        ):
            client.infer("add_sub", inputs)

        with pytest.raises(InferenceServerException, match="already") as info:
            client.register_system_shared_memory("io", key, 96)
        assert info.value.status() == "400"
        client.unregister_system_shared_memory("io")
        assert client.get_system_shared_memory_status() == []
        with pytest.raises(InferenceServerException) as info:
            client.get_system_shared_memory_status("io")
        assert info.value.status() == "404"
        with pytest.raises(
            InferenceServerException, match="Unable to open shared memory region: '/naiad-no-such-key'"
        ) as info:
            client.register_system_shared_memory("other", "/naiad-no-such-key", 16)
        assert info.value.status() == "400"
        client.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(handle)


def test_shared_memory_register_validation(base_url):
    response = httpx.post(base_url + "/v2/systemsharedmemory/region/r/register", json={"offset": 0, "byte_size": 4})
    assert response.status_code == 400 and "'key'" in response.json()["error"]
    response = httpx.post(
        base_url + "/v2/systemsharedmemory/region/r/register", json={"key": "/k", "offset": 0, "byte_size": "4"}
    )
    assert response.status_code == 400 and "byte_size" in response.json()["error"]


def test_cuda_shared_memory_without_cuda(server, base_url):
    # This machine has no GPU: Triton built without GPUs answers 400 in these words.
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.get_cuda_shared_memory_status() == []
    with pytest.raises(InferenceServerException) as info:
        client.register_cuda_shared_memory("c", base64.b64encode(b"\0" * 64).decode(), 0, 16)
    assert info.value.status() == "400"
    assert info.value.message() == "failed to register CUDA shared memory region: 'c', GPUs not supported"
    response = httpx.post(
        base_url + "/v2/cudasharedmemory/region/c/register",
        json={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 16},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "failed to register CUDA shared memory region: 'c', GPUs not supported"
    client.unregister_cuda_shared_memory()
    client.unregister_cuda_shared_memory("c")


@pytest.fixture(scope="module")
def explicit_server(tmp_path_factory):
    repository = write_repository(tmp_path_factory.mktemp("explicit"))
    process = start_server(
        repository, "--model-control-mode", "explicit", "--load-model", "add_sub", "--allow-client-shm=true"
    )
    yield process
    process.__exit__()


def test_load_and_unload(explicit_server):
    client = httpclient.InferenceServerClient(explicit_server.http_url)
    assert not client.is_model_ready("types")
    client.load_model("types")
    assert client.is_model_ready("types")
    client.unload_model("types")
    assert not client.is_model_ready("types")
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["types"]["state"] == "UNAVAILABLE"
    with pytest.raises(InferenceServerException) as info:
        client.load_model("nosuch")
    # Triton's status and words (naiad's detail after them).
    assert info.value.status() == "500"
    assert info.value.message().startswith("failed to load 'nosuch', failed to poll from model repository")
    client.unload_model("nosuch")  # Triton answers success for a model it never loaded


def test_load_with_config_override(explicit_server):
    client = httpclient.InferenceServerClient(explicit_server.http_url)
    config = {
        "backend": "numpy",
        "max_batch_size": 2,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
    }
    client.load_model("failing", config=json.dumps(config))
    assert client.get_model_config("failing")["max_batch_size"] == 2
    # The override drops the config's op=fail parameter: the model is now an identity.
    infer_input = httpclient.InferInput("INPUT0", [2, 1], "FP32")
    infer_input.set_data_from_numpy(np.array([[1], [2]], np.float32))
    np.testing.assert_array_equal(client.infer("failing", [infer_input]).as_numpy("OUTPUT0"), [[1], [2]])
    client.unload_model("failing")


def test_load_request_validation(explicit_server):
    base = f"http://{explicit_server.http_url}/v2/repository/models"
    response = httpx.post(base + "/types/load", json={"parameters": {"config": "{nope"}})
    # Triton answers a config override it cannot read as a failed poll.
    assert response.status_code == 500 and "'config' parameter" in response.json()["error"]
    response = httpx.post(base + "/types/load", json={"parameters": {"config": "[1]"}})
    assert response.status_code == 500 and "JSON object" in response.json()["error"]
    response = httpx.post(
        base + "/types/load", json={"parameters": {"config": json.dumps({"backend": "numpy", "max_batch_size": -1})}}
    )
    assert response.status_code == 400 and "max_batch_size" in response.json()["error"]
    response = httpx.post(base + "/evil/load", json={"parameters": {"config": "{}", "file:../evil.py": "AAAA"}})
    assert (
        response.status_code == 400
        and "Invalid file parameter 'file:../evil.py' must stay within model directory" in response.json()["error"]
    )
    response = httpx.post(base + "/evil/load", json={"parameters": {"config": "{}", "file:1/model.py": "not base64!"}})
    assert response.status_code == 400 and "must hold the file's content in base64" in response.json()["error"]
    response = httpx.post(base + "/add_sub/unload", json={"parameters": {"unload_dependents": "yes"}})
    assert response.status_code == 400 and "unload_dependents" in response.json()["error"]
    response = httpx.post(base + "/add_sub/load", content=b"{x")
    assert response.status_code == 400 and "malformed JSON" in response.json()["error"]


def test_load_uploaded_files_and_unload_dependents(explicit_server):
    client = httpclient.InferenceServerClient(explicit_server.http_url)
    config = {
        "backend": "numpy",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    }
    client.load_model("uploaded", config=json.dumps(config), files={"file:1/weights.bin": b"\x00\x01"})
    infer_input = httpclient.InferInput("INPUT0", [2], "FP32")
    infer_input.set_data_from_numpy(np.array([1, 2], np.float32))
    np.testing.assert_array_equal(client.infer("uploaded", [infer_input]).as_numpy("OUTPUT0"), [1, 2])
    ensemble = {
        "platform": "ensemble",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "uploaded",
                    "model_version": -1,
                    "input_map": {"INPUT0": "IN"},
                    "output_map": {"OUTPUT0": "OUT"},
                }
            ]
        },
    }
    client.load_model("pipeline", config=json.dumps(ensemble), files={"file:1/.keep": b""})
    assert client.is_model_ready("pipeline")
    # Triton's unload_dependents: an ensemble's step models go with it.
    client.unload_model("pipeline", unload_dependents=True)
    assert not client.is_model_ready("pipeline") and not client.is_model_ready("uploaded")


def test_repository_index_ready_filter(explicit_server):
    client = httpclient.InferenceServerClient(explicit_server.http_url)
    everything = client.get_model_repository_index()
    assert {"name": "classify"} in everything
    ready = httpx.post(f"http://{explicit_server.http_url}/v2/repository/index", json={"ready": True}).json()
    assert ready == [{"name": "add_sub", "version": "1", "state": "READY"}]
    response = httpx.post(f"http://{explicit_server.http_url}/v2/repository/index", json={"ready": "yes"})
    assert response.status_code == 400


def test_hypercorn_serves_http1_and_http2(repository):
    process = start_server(repository, "--http-server", "hypercorn")
    try:
        client = httpclient.InferenceServerClient(process.http_url)
        assert client.is_server_ready()
        inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
        for item in inputs:
            item.set_data_from_numpy(np.ones((1, 4), np.float32))
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), np.full((1, 4), 2))
        # HTTP/2 with prior knowledge (h2c).
        with httpx.Client(http1=False, http2=True) as h2:
            response = h2.get(f"http://{process.http_url}/v2/models/add_sub")
        assert response.http_version == "HTTP/2" and response.json()["name"] == "add_sub"
    finally:
        process.__exit__()


def test_port_in_use_is_a_clear_startup_error(server, repository):
    # The last --http-port wins: point this server at the port the session server holds.
    blocked = server_process(repository, "--http-port", str(server.http_port))
    blocked.start(expect_ready=False)
    try:
        assert blocked.wait(60) != 0
        assert f"cannot listen on 127.0.0.1:{server.http_port}" in blocked.log()
    finally:
        blocked.__exit__()


def test_aio_client_covers_the_management_endpoints(explicit_server):
    import asyncio

    import tritonclient.http.aio as aioclient

    async def go():
        client = aioclient.InferenceServerClient(explicit_server.http_url)
        try:
            assert (await client.get_server_metadata())["name"] == "triton"
            assert (await client.get_model_config("add_sub"))["max_batch_size"] == 8
            stats = await client.get_inference_statistics("add_sub")
            assert stats["model_stats"][0]["name"] == "add_sub"
            await client.load_model("identity")
            assert await client.is_model_ready("identity")
            index = await client.get_model_repository_index()
            assert {"name": "identity", "version": "1", "state": "READY"} in index
            await client.unload_model("identity")
            assert not await client.is_model_ready("identity")
            key = f"/naiad-aio-{uuid.uuid4().hex[:8]}"
            handle = shm.create_shared_memory_region("aio", key, 64)
            try:
                await client.register_system_shared_memory("aio", key, 64)
                assert (await client.get_system_shared_memory_status())[0]["key"] == key
                await client.unregister_system_shared_memory("aio")
                assert await client.get_system_shared_memory_status() == []
            finally:
                shm.destroy_shared_memory_region(handle)
            assert await client.get_cuda_shared_memory_status() == []
        finally:
            await client.close()

    asyncio.run(go())


def test_sigterm_stops_every_http_server_cleanly(repository):
    for kind in ("naiad", "uvicorn", "hypercorn"):
        process = start_server(repository, "--http-server", kind)
        assert httpclient.InferenceServerClient(process.http_url).is_server_live()
        assert process.stop() == 0, process.log()
        process.__exit__()


@pytest.mark.parametrize("strict", ["true", "false"])
def test_readiness_with_a_model_that_failed_to_load(tmp_path, strict):
    repository = write_repository(
        tmp_path, {"add_sub": MODELS["add_sub"], "broken": 'backend: "numpy" max_batch_size: -3'}
    )
    process = start_server(repository, "--exit-on-error", "false", "--strict-readiness", strict)
    try:
        response = httpx.get(f"http://{process.http_url}/v2/health/ready")
        assert response.status_code == (400 if strict == "true" else 200)
        assert httpx.get(f"http://{process.http_url}/v2/health/live").status_code == 200
        broken = httpx.get(f"http://{process.http_url}/v2/models/broken")
        assert broken.status_code == 503 and "max_batch_size" in broken.json()["error"]
        index = httpclient.InferenceServerClient(process.http_url).get_model_repository_index()
        assert {"name": "broken", "state": "UNAVAILABLE"} == {k: v for k, v in index[1].items() if k != "reason"}
    finally:
        process.__exit__()


def test_logging_and_trace_extensions(base_url):
    client = httpclient.InferenceServerClient(base_url.removeprefix("http://"))
    settings = client.get_log_settings()
    assert settings["log_verbose_level"] == 0 and settings["log_format"] == "default"
    assert client.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
    assert httpx.get(base_url + "/v2/logging").json()["log_verbose_level"] == 1
    client.update_log_settings({"log_verbose_level": 0})
    response = httpx.post(base_url + "/v2/logging", json={"log_format": "fancy"})
    assert response.status_code == 400 and "log_format" in response.json()["error"]
    response = httpx.post(base_url + "/v2/logging", json={"log_colour": True})
    assert response.status_code == 400 and "log_colour" in response.json()["error"]

    assert client.get_trace_settings()["trace_level"] == ["OFF"]
    updated = client.update_trace_settings(model_name="add_sub", settings={"trace_rate": "5"})
    assert updated["trace_rate"] == "5"
    assert client.get_trace_settings()["trace_rate"] == "1000"
    assert client.get_trace_settings(model_name="add_sub")["trace_rate"] == "5"
    client.update_trace_settings(model_name="add_sub", settings={"trace_rate": None})
    assert client.get_trace_settings(model_name="add_sub")["trace_rate"] == "1000"
    response = httpx.post(base_url + "/v2/trace/setting", json={"trace_level": ["LOUD"]})
    assert response.status_code == 400 and "trace_level" in response.json()["error"]
    assert httpx.get(base_url + "/v2/models/nope/trace/setting").status_code == 400  # as Triton answers
