"""Triton's generate extension over a real socket: flat JSON mapped onto inputs and parameters,
Server-Sent Events read with httpx streaming, the curl lines docs/http.md shows, and the errors
(checked against Triton 2.51 with the same models)."""

from __future__ import annotations

import http.client
import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from naiad.testing import ServerProcess

MODELS = Path(__file__).resolve().parent / "generate_models"
DOC = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()


@pytest.fixture(scope="module")
def base_url():
    with ServerProcess(MODELS, "--allow-grpc", "false", "--allow-metrics", "false") as server:
        yield f"http://{server.http_url}"


def stream(base_url: str, model: str, body: dict) -> tuple[httpx.Response, list[dict]]:
    """The response and the events of one generate_stream request, read as they arrive."""
    events = []
    with httpx.stream("POST", f"{base_url}/v2/models/{model}/generate_stream", json=body, timeout=30) as response:
        buffer = ""
        for text in response.iter_text():
            buffer += text
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                assert event.startswith("data: "), event
                events.append(json.loads(event.removeprefix("data: ")))
        assert buffer == ""
    return response, events


def test_generate_maps_keys_to_inputs_and_parameters(base_url):
    body = {"values": [1, 2], "factor": 3, "id": "r7", "temperature": 0.5, "parameters": {"greedy": True}}
    response = httpx.post(f"{base_url}/v2/models/scaler/generate", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    # The model saw every key that is not an input as a parameter ("id" too, as in Triton).
    assert json.loads(answer.pop("parameters")) == {"id": "r7", "temperature": 0.5, "greedy": True}
    assert answer == {"id": "r7", "model_name": "scaler", "model_version": "1", "scaled": [3.0, 6.0], "total": 9.0}
    # An input may travel inside "parameters" too; a scalar fills a one-element variable dim.
    nested = httpx.post(f"{base_url}/v2/models/scaler/generate", json={"values": 4, "parameters": {"factor": 2}})
    assert nested.json()["scaled"] == 8.0


def test_generate_stream_sends_one_event_per_token(base_url):
    response, events = stream(base_url, "tokens", {"text_input": "the quick brown fox", "max_tokens": 3})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert events == [
        {"model_name": "tokens", "model_version": "1", "text_output": word} for word in ["the", "quick", "brown"]
    ]


def test_generate_stream_requests_back_to_back_on_one_kept_alive_connection(base_url):
    """Each request follows the last at once on the same HTTP/1.1 connection, as a client
    that keeps its connection alive does: every one gets all its events (a bug once closed
    the connection after the first event of a later request)."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"text_input": "one two three four", "max_tokens": 4})
    try:
        for attempt in range(12):
            connection.request("POST", "/v2/models/tokens/generate_stream", body, {"content-type": "application/json"})
            response = connection.getresponse()
            assert response.status == 200, attempt
            text = response.read().decode()  # the whole chunked body, up to its last chunk
            events = [json.loads(e.removeprefix("data: "))["text_output"] for e in text.split("\n\n") if e]
            assert events == ["one", "two", "three", "four"], (attempt, text)
            assert not response.will_close, attempt
    finally:
        connection.close()


def test_a_model_that_fails_mid_stream_sends_an_error_event(base_url):
    response, events = stream(base_url, "tokens", {"text_input": "a b c", "parameters": {"fail_after": 2}})
    assert response.status_code == 200
    assert [e.get("text_output") for e in events[:2]] == ["a", "b"]
    assert events[2:] == [{"error": "the model failed after 2 words"}]
    # Failing at once: the status line is the first response's error (TritonError's default code,
    # INTERNAL), the body still events (Triton's way).
    response, events = stream(base_url, "tokens", {"text_input": "a b c", "parameters": {"fail_after": 0}})
    assert response.status_code == 500
    assert events == [{"error": "the model failed after 0 words"}]


def test_a_client_that_leaves_mid_stream_cancels_the_request(base_url):
    def finished():
        model_stats = httpx.get(f"{base_url}/v2/models/tokens/stats").json()["model_stats"][0]
        return sum(model_stats["inference_stats"][kind]["count"] for kind in ("success", "fail"))

    before = finished()
    body = {"text_input": "first second", "parameters": {"wait_for_cancel": True}}
    with httpx.stream("POST", f"{base_url}/v2/models/tokens/generate_stream", json=body, timeout=30) as response:
        first = next(response.iter_text())
    assert json.loads(first.removeprefix("data: "))["text_output"] == "first"
    # The model waits up to 20 s for the cancellation, then ends the request; a cancelled
    # request ends within seconds of the client leaving.
    deadline = time.monotonic() + 10
    while finished() == before:
        assert time.monotonic() < deadline, "the request was not cancelled"
        time.sleep(0.05)


def test_a_model_that_is_not_decoupled_streams_its_one_response(base_url):
    response, events = stream(base_url, "scaler", {"values": [1, 2, 3], "factor": 2})
    assert response.status_code == 200
    assert [e["scaled"] for e in events] == [[2.0, 4.0, 6.0]]


def test_generate_needs_exactly_one_response(base_url):
    one = httpx.post(f"{base_url}/v2/models/tokens/generate", json={"text_input": "single"})
    assert one.json() == {"model_name": "tokens", "model_version": "1", "text_output": "single"}
    many = httpx.post(f"{base_url}/v2/models/tokens/generate", json={"text_input": "two words"})
    assert many.status_code == 500
    assert many.json()["error"].startswith("generate expects model to produce exactly 1 response")


@pytest.mark.parametrize("path", ["generate", "generate_stream"])
@pytest.mark.parametrize(
    "model, body, status, words",
    [
        ("nope", {"text_input": "a"}, 404, "unknown model: 'nope'"),
        ("scaler", {"values": "x", "factor": 3}, 400, "input 'values': FP32 data must be numbers"),
        ("scaler", {"values": [1], "factor": 2.5}, 400, "input 'factor': INT32 data must be integers"),
        ("scaler", {"values": [1], "factor": 2, "stop": ["a"]}, 400, "parameter 'stop' has invalid type"),
        ("scaler", {"values": [1]}, 400, "missing required input(s) ['factor']"),
        (
            "scaler",
            {"values": [1], "factor": [1, 2]},
            400,
            "can not convert input 'factor' to tensor with proper shape",
        ),
        (
            "scaler",
            {"values": [1], "factor": 1, "parameters": 3},
            400,
            "Expected JSON object for keyword: 'parameters'",
        ),
    ],
)
def test_bad_requests_are_json_errors_before_any_event(base_url, path, model, body, status, words):
    response = httpx.post(f"{base_url}/v2/models/{model}/{path}", json=body)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert words in response.json()["error"]
    # ... and the server goes on serving.
    assert httpx.post(f"{base_url}/v2/models/tokens/generate", json={"text_input": "ok"}).status_code == 200


def test_generate_is_a_listed_extension(base_url):
    assert "generate" in httpx.get(f"{base_url}/v2").json()["extensions"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_lines_of_the_docs(base_url):
    block = DOC.split("## Generate", 1)[1].split("```\n", 2)[1]
    commands = re.split(r"^\$ ", block, flags=re.M)[1:]
    assert len(commands) == 4
    for command in commands:
        line, expected = command.split("\n", 1)
        args = shlex.split(line.replace("localhost:8000", base_url))
        result = subprocess.run(args, capture_output=True, text=True, timeout=30, check=True)
        assert result.stdout.rstrip("\n") == expected.rstrip("\n"), line


@pytest.mark.parametrize("endpoint", ["generate", "generate_stream"])
def test_a_generate_body_naming_a_key_twice_is_refused(base_url, endpoint):
    """As Triton: a duplicate key is a client bug whichever value it meant (orjson alone
    would keep the last one)."""
    body = b'{"text_input": "a b", "max_tokens": 1, "max_tokens": 2}'
    response = httpx.post(
        f"{base_url}/v2/models/tokens/{endpoint}", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json() == {"error": "duplicate key 'max_tokens' in the generate request body"}
    nested = b'{"text_input": "a", "parameters": {"k": 1, "k": 2}}'
    response = httpx.post(f"{base_url}/v2/models/tokens/{endpoint}", content=nested)
    assert response.status_code == 400 and "duplicate key 'k'" in response.json()["error"]
