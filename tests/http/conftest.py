from pathlib import Path

import pytest
from http_servers import start_server, write_repository

from naiad.testing import ServerProcess


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("repository"))


@pytest.fixture(scope="session")
def server(repository: Path):
    process = start_server(repository, "--http-max-input-size", str(1024 * 1024), "--allow-client-shm=true")
    yield process
    process.__exit__()


@pytest.fixture(scope="session")
def base_url(server: ServerProcess) -> str:
    return f"http://{server.http_url}"
