"""Servers for the security tests: `naiad serve` on the numpy test backend over HTTP and
gRPC (helpers in security_servers.py, a name no other test directory uses)."""

from __future__ import annotations

from pathlib import Path

import pytest
from security_servers import numpy_server, write_repository


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("security-models"))


@pytest.fixture(scope="session")
def shm_server(repository: Path):
    """Client shared memory allowed."""
    with numpy_server(repository, "--allow-client-shm=true") as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


@pytest.fixture(scope="session")
def default_server(repository: Path):
    """Every flag at its default: client shared memory off."""
    with numpy_server(repository) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()
