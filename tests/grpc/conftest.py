"""Session fixtures for the gRPC tests: one real `naiad serve` process on a repository of
numpy-backend models (helpers in grpc_servers.py, a name no other test directory uses)."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpc_servers import numpy_server, write_repository

from naiad.testing import ServerProcess


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("grpc-models"))


@pytest.fixture(scope="session")
def server(repository: Path):
    with numpy_server(repository, "--allow-client-shm=true") as process:
        yield process
        # Every bad request of the suite must have been answered, not crashed a handler.
        assert "Traceback" not in process.log(), process.log()


@pytest.fixture(scope="session")
def url(server: ServerProcess) -> str:
    return server.grpc_url
