"""A model repository on a real S3-protocol server on loopback (moto's server mode)."""

import asyncio

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import InferenceRequest, Server, ServerOptions, Tensor
from naiad.testing import free_port

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")
pytest.importorskip("s3fs")

CONFIG = b"""backend: "numpy" max_batch_size: 0 version_policy: { all: {} }
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }]"""


@pytest.fixture
def s3(monkeypatch, tmp_path):
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the local mirror goes under the test's directory
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
    client.create_bucket(Bucket="models")
    yield port, client
    server.stop()


def request(version=""):
    return InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.arange(4, dtype=np.int32))], model_version=version)


@pytest.mark.parametrize("style", ["endpoint_in_url", "aws_endpoint_url_env"])
def test_serves_and_polls_an_s3_repository(s3, monkeypatch, style):
    port, client = s3
    client.put_object(Bucket="models", Key="repo/m/config.pbtxt", Body=CONFIG)
    client.put_object(Bucket="models", Key="repo/m/1/weights.bin", Body=b"v1")
    if style == "endpoint_in_url":
        location = f"s3://127.0.0.1:{port}/models/repo"
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        location = "s3://models/repo"

    async def go():
        options = ServerOptions(
            [location], model_control_mode="poll", repository_poll_secs=3600, backend_plugins=[NumpyPlugin()]
        )
        async with Server(options) as server:
            assert server.startup_failures == []
            assert (await server.infer(request())).model_version == "1"
            client.put_object(Bucket="models", Key="repo/m/2/weights.bin", Body=b"v2")
            await server.poller.poll_once()
            assert server.model_metadata("m")["versions"] == ["1", "2"]
            assert (await server.infer(request())).model_version == "2"
            client.delete_object(Bucket="models", Key="repo/m/2/weights.bin")
            await server.poller.poll_once()
            assert server.model_metadata("m")["versions"] == ["1"]

    asyncio.run(go())


def test_unreachable_bucket_is_a_clear_error(s3):
    port, _ = s3

    async def go():
        server = Server(ServerOptions([f"s3://127.0.0.1:{port}/no-such-bucket/repo"], backend_plugins=[NumpyPlugin()]))
        with pytest.raises(Exception) as info:
            await server.start()
        assert "no-such-bucket" in str(info.value)

    asyncio.run(go())


def test_object_keys_that_are_not_plain_relative_paths_are_skipped(s3, tmp_path):
    from naiad.repository.remote import open_repository

    port, client = s3
    client.put_object(Bucket="models", Key="repo/m/config.pbtxt", Body=CONFIG)
    client.put_object(Bucket="models", Key="repo/m/1/weights.bin", Body=b"v1")
    for key in ("repo/m/1/../../../../escaped.bin", "repo/m/./1/dot.bin", "repo/m//1/empty.bin"):
        client.put_object(Bucket="models", Key=key, Body=b"planted")
    mirror = tmp_path / "mirror"
    repository = open_repository(f"s3://127.0.0.1:{port}/models/repo", cache_root=mirror)
    assert list(repository.list_models()) == ["m"]
    mirrored = sorted(str(p.relative_to(mirror)) for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".bin")
    assert [name for name in mirrored if "weights" not in name] == [], mirrored
