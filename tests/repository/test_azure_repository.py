"""A model repository on Azure Blob Storage: Azurite (the Azure Storage emulator, from npm:
scripts/install-azurite.sh) on loopback, `naiad serve` reading `as://` through adlfs,
tritonclient asking."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import remote_repository_scenarios as scenarios
from object_store_proxy import ObjectStoreProxy

from naiad.testing import free_port

pytest.importorskip("adlfs")
blob = pytest.importorskip("azure.storage.blob")
pytest.importorskip("onnx")
pytest.importorskip("naiad_backend_onnx")
pytest.importorskip("naiad_backend_python")

pytestmark = pytest.mark.slow

# Azurite's well-known development account, published with the emulator.
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _azurite() -> str | None:
    checkout = Path(__file__).resolve().parents[2]
    installed = checkout / ".ci" / "node_modules" / ".bin" / "azurite-blob"
    return str(installed) if installed.exists() else shutil.which("azurite-blob")


def connection_string(port: int) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
    )


class EmulatedContainer:
    """The container "models" of Azurite, written through the Azure SDK."""

    def __init__(self, port: int, tmp_path: Path) -> None:
        self.port = port
        self.url = f"as://{ACCOUNT}/models/repo"
        self.env = {"AZURE_STORAGE_CONNECTION_STRING": connection_string(port), "TMPDIR": str(tmp_path)}
        service = blob.BlobServiceClient.from_connection_string(connection_string(port))
        self._container = service.get_container_client("models")
        self._container.create_container()

    def put(self, key: str, data: bytes) -> None:
        self._container.upload_blob(key, data, overwrite=True)

    def delete(self, key: str) -> None:
        self._container.delete_blob(key)


@pytest.fixture
def azure(tmp_path):
    command = _azurite()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs the Azure repository tests: bash scripts/install-azurite.sh installs Azurite")
        pytest.skip("Azurite not found: bash scripts/install-azurite.sh installs it into .ci/node_modules")
    port = free_port()
    process = subprocess.Popen(
        [command, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent", "--skipApiVersionCheck",
         "--inMemoryPersistence"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    try:
        _wait_for_port(port, process)
        yield EmulatedContainer(port, tmp_path)
    finally:
        process.terminate()
        process.wait(10)


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            assert process.stderr is not None
            raise RuntimeError(f"Azurite exited with {process.returncode}: {process.stderr.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("Azurite did not listen within 30 s")


def test_serves_and_follows_an_azure_repository(azure):
    scenarios.serves_and_follows_the_store(azure, {})


def test_explicit_load_and_unload_with_account_and_key(azure):
    """AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, as Triton documents them, with the
    emulator's endpoint in the URL."""
    azure.url = f"as://127.0.0.1:{azure.port}/{ACCOUNT}/models/repo"
    azure.env = {"AZURE_STORAGE_ACCOUNT": ACCOUNT, "AZURE_STORAGE_KEY": KEY, "TMPDIR": azure.env["TMPDIR"]}
    scenarios.loads_and_unloads_explicitly(azure, {"AZURE_STORAGE_CONNECTION_STRING": ""})


def test_keeps_serving_while_azure_is_away(azure):
    proxy = ObjectStoreProxy(azure.port)
    try:
        scenarios.keeps_serving_while_the_store_is_away(
            azure, proxy, {"AZURE_STORAGE_CONNECTION_STRING": connection_string(proxy.port)}
        )
    finally:
        proxy.close()


def test_unreachable_azure_at_start_names_store_url_and_credentials(tmp_path):
    closed = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")}
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", f"as://127.0.0.1:{closed}/{ACCOUNT}/models/repo",
         "--repository-timeout-secs", "5", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
        env={**env, "AZURE_STORAGE_ACCOUNT": ACCOUNT, "AZURE_STORAGE_KEY": KEY, "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        f"cannot list model repository 'as://127.0.0.1:{closed}/{ACCOUNT}/models/repo' (Azure Blob Storage at "
        f"http://127.0.0.1:{closed}/{ACCOUNT}, credentials: AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY)"
        in (result.stderr + result.stdout)
    ), result.stderr
