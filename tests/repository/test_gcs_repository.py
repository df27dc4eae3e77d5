"""A model repository on Google Cloud Storage: a real GCS emulator (gcp-storage-emulator)
on loopback, `naiad serve` reading `gs://` through gcsfs, tritonclient asking."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
import urllib.request

import pytest
import remote_repository_scenarios as scenarios
from object_store_proxy import ObjectStoreProxy

from naiad.testing import free_port

pytest.importorskip("gcsfs")
emulator = pytest.importorskip("gcp_storage_emulator.server")
pytest.importorskip("onnx")
pytest.importorskip("naiad_backend_onnx")
pytest.importorskip("naiad_backend_python")

pytestmark = pytest.mark.slow


class EmulatedBucket:
    """The bucket "models" of an emulator, written through its JSON API."""

    def __init__(self, port: int, tmp_path) -> None:  # noqa: ANN001
        self.api = f"http://127.0.0.1:{port}"
        self.url = "gs://models/repo"
        # The emulator is named the way Google's own libraries take it; TMPDIR puts the
        # server's mirror under the test's directory.
        self.env = {"STORAGE_EMULATOR_HOST": self.api, "TMPDIR": str(tmp_path)}

    def put(self, key: str, data: bytes) -> None:
        name = urllib.parse.quote(key, safe="")
        request = urllib.request.Request(
            f"{self.api}/upload/storage/v1/b/models/o?uploadType=media&name={name}", data=data, method="POST"
        )
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 200

    def delete(self, key: str) -> None:
        name = urllib.parse.quote(key, safe="")
        request = urllib.request.Request(f"{self.api}/storage/v1/b/models/o/{name}", method="DELETE")
        with urllib.request.urlopen(request) as answer:
            assert answer.status in (200, 204)  # the real API answers 204, the emulator 200


@pytest.fixture
def gcs(tmp_path):
    port = free_port()
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket="models")
    server.start()
    yield EmulatedBucket(port, tmp_path)
    server.stop()


def test_serves_and_follows_a_gcs_repository(gcs):
    scenarios.serves_and_follows_the_store(gcs, {})


def test_explicit_load_and_unload_from_gcs(gcs):
    scenarios.loads_and_unloads_explicitly(gcs, {})


def test_endpoint_in_the_url_names_the_emulator(gcs):
    """`gs://host:port/bucket/path`, as Triton names an S3 endpoint, without STORAGE_EMULATOR_HOST."""
    host = gcs.api.removeprefix("http://")
    gcs.url = f"gs://{host}/models/repo"
    gcs.env.pop("STORAGE_EMULATOR_HOST")
    scenarios.loads_and_unloads_explicitly(gcs, {})


def test_keeps_serving_while_gcs_is_away(gcs, tmp_path):
    proxy = ObjectStoreProxy(int(gcs.api.rsplit(":", 1)[1]))
    try:
        scenarios.keeps_serving_while_the_store_is_away(
            gcs, proxy, {"STORAGE_EMULATOR_HOST": f"127.0.0.1:{proxy.port}"}
        )
    finally:
        proxy.close()


def test_unreachable_gcs_at_start_names_store_url_and_credentials(tmp_path):
    closed = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", "gs://models/repo",
         "--repository-timeout-secs", "5", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
        env={**_base_env(), "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{closed}", "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        f"cannot list model repository 'gs://models/repo' (Google Cloud Storage at http://127.0.0.1:{closed}, "
        "credentials: anonymous (emulator endpoint))" in result.stderr + result.stdout
    ), result.stderr


def _base_env() -> dict[str, str]:
    import os  # noqa: PLC0415

    return {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "STORAGE_EMULATOR"))}
