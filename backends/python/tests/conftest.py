from typing import Any

import pytest
from python_backend_servers import MODELS, ServerThread

from naiad import ServerOptions


@pytest.fixture(scope="session")
def served() -> Any:
    """Every model of tests/models, loaded once."""
    server = ServerThread(ServerOptions(model_repositories=[str(MODELS)]))
    assert server.server.startup_failures == []
    yield server
    server.close()
