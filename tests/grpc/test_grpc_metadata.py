"""Health, metadata, config, statistics, CUDA shared memory, trace and log settings, and the
standard grpc.health.v1 service, over real sockets."""

from __future__ import annotations

import asyncio
import base64

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.grpc.aio as tga
from grpc_servers import expect_error, numpy_server, write_repository
from tritonclient.utils import InferenceServerException

from naiad import __version__


@pytest.fixture(scope="module")
def client(url):
    with tg.InferenceServerClient(url) as c:
        yield c


def test_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("add_sub", "2")
    assert not client.is_model_ready("nope")
    expect_error(
        lambda: client.is_model_ready("add_sub", "x"),
        "INVALID_ARGUMENT",
        "failed to get model version from specified version string 'x'",
    )


def test_server_metadata(client):
    metadata = client.get_server_metadata()
    assert metadata.name == "triton" and metadata.version == __version__
    assert {"model_repository", "system_shared_memory", "statistics", "parameters"} <= set(metadata.extensions)


def test_model_metadata(client):
    metadata = client.get_model_metadata("add_sub", as_json=True)
    assert metadata == {
        "name": "add_sub",
        "versions": ["1"],
        "platform": "numpy",
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "4"]},
            {"name": "INPUT1", "datatype": "FP32", "shape": ["-1", "4"]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": ["-1", "4"]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": ["-1", "4"]},
        ],
    }
    assert client.get_model_metadata("identity_bytes").inputs[0].datatype == "BYTES"
    expect_error(lambda: client.get_model_metadata("nope"), "NOT_FOUND", "unknown model: 'nope'")
    expect_error(
        lambda: client.get_model_metadata("add_sub", "3"),
        "NOT_FOUND",
        "Request for unknown model: 'add_sub' version 3 is not found",
    )


def test_model_config(client):
    config = client.get_model_config("repeat").config
    assert config.name == "repeat" and config.backend == "numpy"
    assert config.model_transaction_policy.decoupled
    assert [i.name for i in config.input] == ["IN"]
    as_json = client.get_model_config("add_sub", as_json=True)["config"]
    assert as_json["max_batch_size"] == 8 and as_json["parameters"]["op"]["string_value"] == "add_sub"
    expect_error(lambda: client.get_model_config("nope"), "NOT_FOUND", "'nope'")


def test_statistics(client):
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = tg.InferInput(name, [3, 4], "FP32")
        tensor.set_data_from_numpy(np.ones((3, 4), np.float32))
        inputs.append(tensor)
    before = client.get_inference_statistics("add_sub").model_stats[0]
    client.infer("add_sub", inputs)
    stats = client.get_inference_statistics("add_sub", "1").model_stats
    assert [(s.name, s.version) for s in stats] == [("add_sub", "1")]
    after = stats[0]
    assert after.inference_count == before.inference_count + 3
    assert after.execution_count == before.execution_count + 1
    assert after.inference_stats.success.count == before.inference_stats.success.count + 1
    assert after.inference_stats.success.ns > before.inference_stats.success.ns
    assert 3 in [b.batch_size for b in after.batch_stats]
    assert after.last_inference > 0
    every = {s.name for s in client.get_inference_statistics().model_stats}
    assert {"add_sub", "identity", "repeat"} <= every
    expect_error(lambda: client.get_inference_statistics("nope"), "INVALID_ARGUMENT", "'nope'", "not available")
    expect_error(lambda: client.get_inference_statistics("add_sub", "4"), "INVALID_ARGUMENT", "not available")
    # Asking about an unknown model must not make it appear in the repository index.
    assert "nope" not in [m.name for m in client.get_model_repository_index().models]


def test_cuda_shared_memory_without_cuda(client):
    # This machine has no GPU: Triton built without GPUs answers in these words.
    assert not client.get_cuda_shared_memory_status().regions
    message = expect_error(
        lambda: client.register_cuda_shared_memory("gpu", base64.b64encode(b"\0" * 64), 0, 64), "INVALID_ARGUMENT"
    )
    assert message == "failed to register CUDA shared memory region: 'gpu', GPUs not supported"
    expect_error(lambda: client.get_cuda_shared_memory_status("gpu"), "NOT_FOUND")
    client.unregister_cuda_shared_memory()  # nothing registered: nothing to do
    client.unregister_cuda_shared_memory("gpu")


def test_trace_settings(client):
    settings = client.get_trace_settings(as_json=True)["settings"]
    assert settings["trace_level"] == {"value": ["OFF"]}
    assert settings["trace_rate"] == {"value": ["1000"]}
    assert client.get_trace_settings(model_name="add_sub", as_json=True)["settings"] == settings
    expect_error(
        lambda: client.get_trace_settings(model_name="nope"), "INVALID_ARGUMENT", "Request for unknown model : nope"
    )
    updated = client.update_trace_settings(model_name="add_sub", settings={"trace_rate": ["7"]}, as_json=True)
    assert updated["settings"]["trace_rate"] == {"value": ["7"]}
    assert client.get_trace_settings(as_json=True)["settings"]["trace_rate"] == {"value": ["1000"]}
    client.update_trace_settings(model_name="add_sub", settings={"trace_rate": []})
    assert client.get_trace_settings(model_name="add_sub", as_json=True)["settings"] == settings
    expect_error(
        lambda: client.update_trace_settings(settings={"trace_level": ["LOUD"]}), "INVALID_ARGUMENT", "trace_level"
    )


def test_log_settings(client):
    settings = client.get_log_settings(as_json=True)["settings"]
    assert settings["log_verbose_level"] == {"uint32_param": 0}
    assert settings["log_info"] == {"bool_param": True}
    assert settings["log_format"] == {"string_param": "default"}
    updated = client.update_log_settings({"log_verbose_level": 1}, as_json=True)["settings"]
    assert updated["log_verbose_level"] == {"uint32_param": 1}
    assert client.get_log_settings(as_json=True)["settings"]["log_verbose_level"] == {"uint32_param": 1}
    client.update_log_settings({"log_verbose_level": 0})
    expect_error(lambda: client.update_log_settings({"log_color": True}), "INVALID_ARGUMENT", "log_color")
    expect_error(lambda: client.update_log_settings({"log_format": "fancy"}), "INVALID_ARGUMENT", "log_format")


def test_standard_health_service(url):
    """grpc.health.v1.Health, checked on the wire (HealthCheckResponse{status: SERVING} is
    b"\\x08\\x01"), as Kubernetes and grpc_health_probe call it."""
    identity = lambda raw: raw  # noqa: E731
    with grpc.insecure_channel(url) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=identity, response_deserializer=identity
        )
        assert check(b"") == b"\x08\x01"
        service = b"inference.GRPCInferenceService"
        assert check(b"\x0a" + bytes([len(service)]) + service) == b"\x08\x01"
        watch = channel.unary_stream(
            "/grpc.health.v1.Health/Watch", request_serializer=identity, response_deserializer=identity
        )
        stream = watch(b"")
        assert next(stream) == b"\x08\x01"
        stream.cancel()


def test_not_ready_server(tmp_path):
    """A model that failed to load at start-up (with --exit-on-error=false) leaves the server
    live but not ready, and the standard health service says NOT_SERVING (b"\\x08\\x02")."""
    repo = write_repository(tmp_path, ["identity"])
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text('backend: "no_such_backend" max_batch_size: 0')
    with numpy_server(repo, "--exit-on-error", "false") as process:
        with tg.InferenceServerClient(process.grpc_url) as client:
            assert client.is_server_live() and not client.is_server_ready()
            assert client.is_model_ready("identity") and not client.is_model_ready("broken")
            rows = {m.name: m for m in client.get_model_repository_index().models}
            assert rows["broken"].state == "UNAVAILABLE" and "no_such_backend" in rows["broken"].reason
            expect_error(lambda: client.get_model_metadata("broken"), "UNAVAILABLE", "'broken'", "no_such_backend")
        with grpc.insecure_channel(process.grpc_url) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            assert check(b"") == b"\x08\x02"


def test_every_rpc_through_the_aio_client(url):
    async def go():
        async with tga.InferenceServerClient(url) as client:
            assert await client.is_server_live() and await client.is_server_ready()
            assert await client.is_model_ready("identity")
            assert (await client.get_server_metadata()).name == "triton"
            assert (await client.get_model_metadata("identity")).name == "identity"
            assert (await client.get_model_config("identity")).config.name == "identity"
            tensor = tg.InferInput("INPUT0", [2], "FP32")
            tensor.set_data_from_numpy(np.array([1, 2], np.float32))
            assert (await client.infer("identity", [tensor])).as_numpy("OUTPUT0").tolist() == [1, 2]
            stats = (await client.get_inference_statistics("identity")).model_stats
            assert stats[0].inference_stats.success.count >= 1
            assert "identity" in [m.name for m in (await client.get_model_repository_index()).models]
            with pytest.raises(InferenceServerException) as info:
                await client.load_model("identity")
            assert info.value.status() == "StatusCode.UNAVAILABLE"
            with pytest.raises(InferenceServerException) as info:
                await client.unload_model("identity")
            assert info.value.status() == "StatusCode.UNAVAILABLE"
            assert not (await client.get_system_shared_memory_status()).regions
            with pytest.raises(InferenceServerException) as info:
                await client.register_system_shared_memory("r", "/naiad_no_such_key", 8)
            assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
            await client.unregister_system_shared_memory()
            assert not (await client.get_cuda_shared_memory_status()).regions
            with pytest.raises(InferenceServerException) as info:
                await client.register_cuda_shared_memory("g", b"aGFuZGxl", 0, 8)
            assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
            assert info.value.message() == "failed to register CUDA shared memory region: 'g', GPUs not supported"
            await client.unregister_cuda_shared_memory()
            assert (await client.get_trace_settings()).settings["trace_level"].value == ["OFF"]
            assert (await client.get_log_settings()).settings["log_info"].bool_param

    asyncio.run(go())
