"""A model repository on a real S3-protocol server on loopback (moto's server mode)."""

import asyncio
import time
import urllib.request

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import InferenceRequest, Server, ServerOptions, Tensor
from naiad.errors import NaiadError
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
    # Moto keeps its buckets in the test process, across servers: each test starts empty.
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST")).close()
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


class ProxiedBucket:
    """The bucket "models" written directly, served to naiad through an ObjectStoreProxy (the
    endpoint in the URL, as Triton names an S3-compatible store)."""

    def __init__(self, client, proxy, tmp_path) -> None:  # noqa: ANN001
        self._client = client
        self.url = f"s3://127.0.0.1:{proxy.port}/models/repo"
        self.env = {"TMPDIR": str(tmp_path)}

    def put(self, key: str, data: bytes) -> None:
        self._client.put_object(Bucket="models", Key=key, Body=data)

    def delete(self, key: str) -> None:
        self._client.delete_object(Bucket="models", Key=key)


@pytest.fixture
def proxied(s3, tmp_path):
    from object_store_proxy import ObjectStoreProxy

    port, client = s3
    proxy = ObjectStoreProxy(port)
    yield ProxiedBucket(client, proxy, tmp_path), proxy
    proxy.close()


# A Python model that answers the size of its version's weights.bin: which file it loaded.
WEIGHTS_MODEL = b"""
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], args["model_version"], "weights.bin")
        self.size = float(os.path.getsize(path))

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.full(4, self.size, np.float32))])
                for r in requests]
"""


def _upload_weights_model(bucket, size: int) -> None:  # noqa: ANN001
    import remote_repository_scenarios as scenarios

    bucket.put("repo/big/config.pbtxt", scenarios.PY_CONFIG)
    bucket.put("repo/big/1/model.py", WEIGHTS_MODEL)
    bucket.put("repo/big/1/weights.bin", b"\1" * size)


@pytest.mark.slow
def test_keeps_serving_while_s3_is_away(proxied):
    pytest.importorskip("naiad_backend_python")
    pytest.importorskip("naiad_backend_onnx")
    import remote_repository_scenarios as scenarios

    bucket, proxy = proxied
    scenarios.keeps_serving_while_the_store_is_away(bucket, proxy, {})


@pytest.mark.slow
def test_a_changed_large_file_is_downloaded_once_by_the_model_home(proxied, tmp_path):
    """Two workers, many polls: one GET per version of the file, written beside and renamed."""
    pytest.importorskip("naiad_backend_python")
    import remote_repository_scenarios as scenarios
    import tritonclient.http as httpclient

    from naiad.testing import ServerProcess

    bucket, proxy = proxied
    big = 8 * 1024 * 1024
    _upload_weights_model(bucket, big)
    flags = ("--model-control-mode", "poll", "--repository-poll-secs", "0.2")
    with ServerProcess("--model-repository", bucket.url, *flags, env=bucket.env, workers=2) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert scenarios.infer(client, "big") == [float(big)] * 4
        time.sleep(1.5)  # several polls
        assert proxy.requests("GET", "big/1/weights.bin") == 1
        bucket.put("repo/big/1/weights.bin", b"\2" * (big + 1))
        scenarios.wait_until(lambda: scenarios.infer(client, "big") == [float(big + 1)] * 4, "the new file served")
        time.sleep(1.5)
        assert proxy.requests("GET", "big/1/weights.bin") == 2
        leftovers = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".partial")]
        assert leftovers == []


@pytest.mark.slow
def test_a_stalled_download_fails_the_poll_and_keeps_the_model(proxied):
    pytest.importorskip("naiad_backend_python")
    import remote_repository_scenarios as scenarios
    import tritonclient.http as httpclient

    from naiad.testing import ServerProcess

    bucket, proxy = proxied
    _upload_weights_model(bucket, 1000)
    flags = ("--model-control-mode", "poll", "--repository-poll-secs", "0.2", "--repository-timeout-secs", "1")
    with ServerProcess("--model-repository", bucket.url, *flags, env=bucket.env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert scenarios.infer(client, "big") == [1000.0] * 4
        proxy.stall("big/1/weights.bin")
        bucket.put("repo/big/1/weights.bin", b"\2" * 2000)
        failure = "poll: cannot download 'models/repo/big/1/weights.bin' from model repository"
        scenarios.wait_until(lambda: failure in server.log(), "the stalled download given up")
        assert "no answer within 1 s (--repository-timeout-secs)" in server.log()
        assert client.is_server_ready() and client.is_model_ready("big")
        assert scenarios.infer(client, "big") == [1000.0] * 4
        proxy.up()
        scenarios.wait_until(lambda: scenarios.infer(client, "big") == [2000.0] * 4, "the file once the store answers")


def test_unreachable_s3_at_start_names_store_url_and_credentials(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    async def go():
        options = ServerOptions(
            [f"s3://127.0.0.1:{port}/models/repo"], repository_timeout_secs=5, backend_plugins=[NumpyPlugin()]
        )
        with pytest.raises(NaiadError) as info:
            await Server(options).start()
        return info.value.message

    message = asyncio.run(go())
    assert message.startswith(
        f"cannot list model repository 's3://127.0.0.1:{port}/models/repo' (S3 at http://127.0.0.1:{port}, "
        "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): "
    ), message


def test_a_stalled_store_at_start_fails_within_the_timeout(s3, tmp_path):
    from object_store_proxy import ObjectStoreProxy

    port, client = s3
    client.put_object(Bucket="models", Key="repo/m/config.pbtxt", Body=CONFIG)
    proxy = ObjectStoreProxy(port)
    proxy.stall()

    async def go():
        options = ServerOptions(
            [f"s3://127.0.0.1:{proxy.port}/models/repo"], repository_timeout_secs=1, backend_plugins=[NumpyPlugin()]
        )
        with pytest.raises(NaiadError) as info:
            await Server(options).start()
        return info.value.message

    started = time.monotonic()
    try:
        message = asyncio.run(go())
    finally:
        proxy.close()
    assert message.endswith("no answer within 1 s (--repository-timeout-secs)"), message
    assert time.monotonic() - started < 30


def test_a_slow_download_that_keeps_arriving_outlives_the_timeout(s3, tmp_path):
    """The bound is on silence, not on the whole file: a large model on a slow link loads."""
    from object_store_proxy import ObjectStoreProxy

    from naiad.repository.remote import open_repository

    port, client = s3
    size = 3_000_000
    client.put_object(Bucket="models", Key="repo/m/config.pbtxt", Body=CONFIG)
    client.put_object(Bucket="models", Key="repo/m/1/weights.bin", Body=b"\1" * size)
    proxy = ObjectStoreProxy(port)
    proxy.throttle(1_000_000)
    started = time.monotonic()
    try:
        repository = open_repository(
            f"s3://127.0.0.1:{proxy.port}/models/repo", cache_root=tmp_path / "mirror", timeout_secs=2
        )
    finally:
        proxy.close()
    assert time.monotonic() - started > 3  # the download took longer than the bound, in pieces
    assert (repository.root / "m" / "1" / "weights.bin").read_bytes() == b"\1" * size
