"""uvicorn is an optional extra (`naiad[uvicorn]`), as hypercorn is (`naiad[http2]`): a server
without it serves HTTP and `/metrics` on naiad's own HTTP/1.1 server, and `--http-server
uvicorn` fails at start-up naming the extra to install. "Without it" is a package on
PYTHONPATH, ahead of the installed one, whose import fails as a missing one does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from http_servers import MODELS, TESTS_DIR, write_repository

from naiad.testing import ServerProcess


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return write_repository(tmp_path_factory.mktemp("optional"), {"add_sub": MODELS["add_sub"]})


@pytest.fixture(scope="module")
def without_uvicorn(tmp_path_factory) -> dict[str, str]:
    """The environment of a process in which uvicorn is not installed."""
    blocker = tmp_path_factory.mktemp("blocker")
    (blocker / "uvicorn").mkdir()
    (blocker / "uvicorn" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'uvicorn\'", name="uvicorn")\n'
    )
    path = os.pathsep.join(filter(None, [str(blocker), str(TESTS_DIR), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path}


def server(repository: Path, env: dict[str, str], *flags: str, workers: int = 1) -> ServerProcess:
    return ServerProcess(
        repository,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-grpc",
        "false",
        *flags,
        env=env,
        workers=workers,
    )


def add_sub(url: str) -> None:
    client = httpclient.InferenceServerClient(url)
    a, b = np.arange(4, dtype=np.float32)[None], np.ones((1, 4), np.float32)
    inputs = [httpclient.InferInput(name, [1, 4], "FP32") for name in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    assert np.array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + b)
    client.close()


def test_without_uvicorn_http_and_metrics_are_served(repository, without_uvicorn):
    with server(repository, without_uvicorn) as process:
        add_sub(process.http_url)
        metrics = httpx.get(process.metrics_url)
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
        assert 'nv_inference_request_success{model="add_sub",version="1"} 1' in metrics.text
        assert httpx.head(process.metrics_url).text == ""
        other = httpx.get(process.metrics_url.replace("/metrics", "/v2/health/live"))
        assert other.status_code == 404 and "/metrics" in other.text
        assert httpx.post(process.metrics_url, content=b"x").status_code == 405
        assert "uvicorn" not in process.log().lower()


def test_http_server_uvicorn_without_it_names_the_extra(repository, without_uvicorn):
    process = server(repository, without_uvicorn, "--http-server", "uvicorn")
    try:
        process.start(expect_ready=False)
        assert process.process is not None
        try:
            code = process.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"naiad kept running without uvicorn:\n{process.log()}")
        assert code != 0
        assert "--http-server uvicorn needs uvicorn: pip install 'naiad[uvicorn]'" in process.log()
        assert "Traceback" not in process.log()
    finally:
        process.stop()


def test_with_workers_the_model_home_serves_metrics_on_every_connection(repository):
    """Under --workers the model home serves the metrics port, alone: each scrape, on a new
    connection, sees the counts of every worker's requests."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")]))}
    with server(repository, env, workers=2) as process:
        for _ in range(3):
            add_sub(process.http_url)
        for _ in range(6):
            with httpx.Client() as client:  # a new connection each time
                scraped = client.get(process.metrics_url)
            assert scraped.status_code == 200, scraped.text
            assert 'nv_inference_request_success{model="add_sub",version="1"} 3' in scraped.text
