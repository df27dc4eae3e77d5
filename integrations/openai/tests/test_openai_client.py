"""The official `openai` client against `naiad serve --allow-openai true` on 127.0.0.1, serving
the example model (examples/models/echo) from the same in-process server as KServe."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from naiad.testing import ServerProcess, free_port

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"


@pytest.fixture(scope="module")
def served():
    port = free_port()
    flags = ("--allow-openai", "true", "--openai-port", str(port), "--allow-grpc", "false", "--allow-metrics", "false")
    with ServerProcess(EXAMPLES, *flags) as server:
        yield server, f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served[1], api_key="unused", max_retries=0, timeout=30)


def test_lists_the_text_models(client):
    assert [m.id for m in client.models.list()] == ["echo"]
    model = client.models.retrieve("echo")
    assert (model.id, model.object, model.owned_by) == ("echo", "model", "naiad")


def test_completion(client):
    completion = client.completions.create(model="echo", prompt="Say this is a test", max_tokens=3)
    assert completion.object == "text_completion"
    assert completion.model == "echo"
    assert [(c.index, c.text, c.finish_reason) for c in completion.choices] == [(0, "Say this is", "stop")]


def test_streaming_completion_sends_a_chunk_per_word(client):
    chunks = list(client.completions.create(model="echo", prompt="one two three", stream=True))
    assert [c.choices[0].text for c in chunks] == ["one", " two", " three", ""]
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, None, "stop"]
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")


def test_chat_completion(client):
    messages = [{"role": "system", "content": "You repeat."}, {"role": "user", "content": "hello there world"}]
    chat = client.chat.completions.create(model="echo", messages=messages)
    assert chat.object == "chat.completion"
    choice = chat.choices[0]
    assert (choice.message.role, choice.message.content, choice.finish_reason) == (
        "assistant",
        "hello there world",
        "stop",
    )


def test_streaming_chat_completion(client):
    messages = [{"role": "user", "content": [{"type": "text", "text": "streamed words"}]}]
    chunks = list(client.chat.completions.create(model="echo", messages=messages, stream=True, max_tokens=5))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "streamed words"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert {c.object for c in chunks} == {"chat.completion.chunk"}


def test_the_stream_ends_with_done(served):
    body = {"model": "echo", "prompt": "a b", "stream": True}
    response = httpx.post(f"{served[1]}/completions", json=body, timeout=30)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    assert all(event.startswith("data: ") for event in events[:-1])


def test_unknown_model_is_an_openai_not_found_error(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 404
    assert caught.value.body["type"] == "invalid_request_error"
    assert caught.value.body["code"] == "model_not_found"
    assert "nope" in caught.value.body["message"]


def test_bad_requests_are_400_and_the_server_goes_on(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="echo", prompt="a b", stop=["b"])
    assert "stop_words" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="echo", messages=[])
    assert client.completions.create(model="echo", prompt="still here").choices[0].text == "still here"


def test_an_error_mid_stream_reaches_the_client(client):
    stream = client.completions.create(model="echo", prompt="a b c", stream=True, extra_body={"fail_after": 1})
    texts = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            texts.append(chunk.choices[0].text)
    assert texts == ["a"]
    assert "echo failed after 1 words" in caught.value.message


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_line_of_the_docs(served):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "openai.md").read_text()
    line, shown = doc.split("\n$ ", 1)[1].split("\n")[:2]
    result = subprocess.run(
        shlex.split(line.replace("localhost:9000/v1", served[1])),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer = re.sub(r'"id":"cmpl-[0-9a-f]+","created":\d+', '"id":"cmpl-...","created":...', result.stdout)
    assert answer == shown


def test_every_worker_serves_the_openai_port():
    """With --workers 2 both processes listen on the OpenAI port (SO_REUSEPORT, as for HTTP):
    the server starts, and the API answers through either."""
    port = free_port()
    flags = ("--allow-openai", "true", "--openai-port", str(port), "--allow-metrics", "false")
    with ServerProcess(EXAMPLES, *flags, workers=2) as server:
        assert "naiad is ready: http, grpc, openai (2 worker processes)" in server.log()
        for _ in range(4):
            with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1") as http:
                assert http.get("/models").json()["data"][0]["id"] == "echo"
