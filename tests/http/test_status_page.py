"""The status page's JSON (`GET /status`) and files over a real socket: every model of the
index with its state and the reason of a failed load, figures equal to the statistics
extension after tritonclient's requests, the server's uptime and processes; the same
figures from a front door under --workers 2; `--http-restricted-api statistics:...` guards
the figures."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from http_servers import MODELS, start_server, write_repository


def add_sub(client, batch=1):
    a = np.ones((batch, 4), np.float32)
    inputs = [httpclient.InferInput("INPUT0", [batch, 4], "FP32"), httpclient.InferInput("INPUT1", [batch, 4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    return client.infer("add_sub", inputs)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    models = {"add_sub": MODELS["add_sub"], "broken": 'backend: "numpy" max_batch_size: -3'}
    return write_repository(tmp_path_factory.mktemp("status"), models)


def start(repo, *flags):
    # "broken" fails to load: the server keeps serving the others.
    return start_server(repo, "--exit-on-error", "false", "--strict-readiness", "false", *flags)


def figures_of(status, name):
    [row] = [m for m in status["models"] if m["name"] == name]
    return row


def test_status_lists_every_model_with_figures_equal_to_the_statistics(repo):
    with start(repo) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for batch in (1, 2, 2):
            add_sub(client, batch)
        status = httpx.get(f"http://{server.http_url}/status").json()
        stats = client.get_inference_statistics("add_sub")["model_stats"][0]
    assert {m["name"] for m in status["models"]} == {"add_sub", "broken"}
    broken = figures_of(status, "broken")
    assert broken["state"] == "UNAVAILABLE" and broken["figures"] is None
    assert "max_batch_size" in broken["reason"]
    add = figures_of(status, "add_sub")
    assert (add["version"], add["state"], add["reason"]) == ("1", "READY", "")
    f = add["figures"]
    assert f["success"] == 3 == stats["inference_stats"]["success"]["count"]
    assert f["inferences"] == 5 == stats["inference_count"]
    assert f["executions"] == 3 == stats["execution_count"]
    assert f["queue_ns"] == stats["inference_stats"]["queue"]["ns"]
    assert f["instances"] == 1
    assert f["batch_sizes"] == {"1": 1, "2": 2}
    assert f["histograms"]["request_s"]["counts"][-1] == 3
    assert f["histograms"]["batch_size"] == {"bounds": [1.0, 2.0, 4.0, 8.0], "counts": [1, 3, 3, 3, 3], "sum": 5.0}
    assert (
        0
        < f["busy_ns"]
        <= stats["inference_stats"]["compute_infer"]["ns"]
        + stats["inference_stats"]["compute_input"]["ns"]
        + stats["inference_stats"]["compute_output"]["ns"]
    )
    server_part = status["server"]
    assert server_part["workers"] == 1 and server_part["model_control_mode"] == "none"
    assert server_part["uptime_s"] > 0 and server_part["resident_bytes"] > 10 * 1024 * 1024


def test_the_page_and_its_files_are_served(repo):
    with start(repo) as server:
        base = f"http://{server.http_url}"
        page = httpx.get(base + "/")
        script = httpx.get(base + "/status/page.js")
        style = httpx.get(base + "/status/page.css")
        missing = httpx.get(base + "/status/../server.py")
        unknown = httpx.get(base + "/status/secret.txt")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script src="/status/page.js"></script>' in page.text
    assert script.headers["content-type"].startswith("text/javascript") and 'fetch("/status"' in script.text
    assert style.headers["content-type"].startswith("text/css")
    assert missing.status_code == 404
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "the status page has no file 'secret.txt' (it has page.css, page.js)"}


def test_restricted_statistics_guard_the_figures_not_the_page(repo):
    with start(repo, "--http-restricted-api", "statistics:admin-key=secret") as server:
        base = f"http://{server.http_url}"
        refused = httpx.get(base + "/status")
        allowed = httpx.get(base + "/status", headers={"admin-key": "secret"})
        page = httpx.get(base + "/")
    assert refused.status_code == 403
    assert refused.json() == {"error": "This API is restricted, expecting header 'admin-key'"}
    assert allowed.status_code == 200 and page.status_code == 200


@pytest.mark.slow
def test_a_front_door_shows_the_model_homes_figures(repo):
    # Under --workers 2 a connection lands in either process; each answer must be the one
    # server's figures (the model home's), so the counts seen never go back.
    with start(repo, "--workers", "2") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        seen = []
        for _ in range(6):
            add_sub(client)
            with httpx.Client() as fresh:  # a new connection each time: any process may answer
                status = fresh.get(f"http://{server.http_url}/status").json()
            seen.append(figures_of(status, "add_sub")["figures"]["success"])
            assert status["server"]["workers"] == 2
    assert seen == [1, 2, 3, 4, 5, 6]


def test_cache_hits_and_misses_reach_the_status(tmp_path):
    cached = MODELS["add_sub"] + "\nresponse_cache { enable: true }"
    repo = write_repository(tmp_path, {"add_sub": cached})
    with start(repo, "--cache-config", "local,size=1048576") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        for _ in range(3):
            add_sub(client)  # the same inputs: one miss, then two hits
        figures = figures_of(httpx.get(f"http://{server.http_url}/status").json(), "add_sub")["figures"]
    assert (figures["cache_hits"], figures["cache_misses"]) == (2, 1)
