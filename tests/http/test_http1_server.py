"""naiad's own HTTP/1.1 server (`--http-server naiad`, the default), over raw sockets: the
parts of HTTP/1.1 clients rely on (keep-alive, pipelining, HTTP/1.0, 100-continue, chunked
bodies, HEAD) and what broken clients send (garbage, upgrades, oversized bodies, leaving
mid-request) get the right answer, and the server keeps serving."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from http_servers import server_process, write_repository

BODY = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]},
        ]
    }
).encode()
INFER = b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def infer_request(extra: bytes = b"", body: bytes = BODY) -> bytes:
    return INFER + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


def connect(base_url: str) -> socket.socket:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Reader:
    """Reads HTTP/1.1 responses (content-length or chunked) off one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self, head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), "connection closed before a response"
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        if head_only or status == 100:
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buffer:
                    assert self._fill()
                size_line, self.buffer = self.buffer.split(b"\r\n", 1)
                size = int(size_line, 16)
                while len(self.buffer) < size + 2:
                    assert self._fill()
                body, self.buffer = body + self.buffer[:size], self.buffer[size + 2 :]
                if size == 0:
                    return status, headers, body
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        self.sock.settimeout(5)
        try:
            return not self._fill()
        except ConnectionResetError:
            return True


def outputs(body: bytes) -> dict[str, list]:
    return {o["name"]: o["data"] for o in json.loads(body)["outputs"]}


def test_keep_alive_and_pipelining_answer_in_order(base_url):
    with connect(base_url) as sock:
        reader = Reader(sock)
        ready = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(infer_request() + ready + infer_request() * 3)  # five requests at once
        status, headers, body = reader.response()
        assert status == 200 and outputs(body) == {"OUTPUT0": [2, 3, 4, 5], "OUTPUT1": [0, 1, 2, 3]}
        assert "date" in headers and headers["content-type"] == "application/json"
        assert reader.response()[:1] == (200,)
        for _ in range(3):
            assert outputs(reader.response()[2])["OUTPUT0"] == [2, 3, 4, 5]
        sock.sendall(infer_request())  # the connection is still usable
        assert reader.response()[0] == 200


def test_http10_and_connection_close(base_url):
    with connect(base_url) as sock:
        sock.sendall(infer_request().replace(b"HTTP/1.1", b"HTTP/1.0"))
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert status == 200 and outputs(body)["OUTPUT0"] == [2, 3, 4, 5]
        assert headers.get("connection") == "close" and reader.closed()
    with connect(base_url) as sock:
        sock.sendall(infer_request(b"Connection: close\r\n"))
        reader = Reader(sock)
        assert reader.response()[0] == 200 and reader.closed()


def test_expect_100_continue_and_chunked_body(base_url):
    with connect(base_url) as sock:
        reader = Reader(sock)
        sock.sendall(INFER + b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert reader.response()[0] == 100
        half = len(BODY) // 2
        for part in (BODY[:half], BODY[half:]):
            sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
        sock.sendall(b"0\r\n\r\n")
        status, _, body = reader.response()
        assert status == 200 and outputs(body)["OUTPUT1"] == [0, 1, 2, 3]


def test_head_has_headers_but_no_body(base_url):
    with connect(base_url) as sock:
        reader = Reader(sock)
        sock.sendall(b"HEAD /v2 HTTP/1.1\r\nHost: x\r\n\r\nGET /v2 HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _ = reader.response(head_only=True)
        assert status in (200, 405)
        status, headers, body = reader.response()  # the next response starts right after the head
        assert status == 200 and json.loads(body)["name"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost x\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ],
)
def test_malformed_requests_get_400_and_close(base_url, garbage):
    with connect(base_url) as sock:
        sock.sendall(garbage)
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert status == 400 and json.loads(body)["error"]
        assert reader.closed()
    assert httpx.get(base_url + "/v2/health/live").status_code == 200


def test_content_length_with_chunked_transfer_encoding_is_refused(base_url):
    """Both framings at once are refused and the connection closed (docs/security.md:
    request smuggling), where Triton lets the chunked coding win: what follows the body
    (a second request hidden in it, for a proxy that trusted Content-Length) is never read."""
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    hidden = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(base_url) as sock:
        sock.sendall(INFER + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % 5 + chunked + hidden)
        reader = Reader(sock)
        status, _, body = reader.response()
        assert status == 400
        assert "Transfer-Encoding" in json.loads(body)["error"]
        assert reader.closed()
    assert httpx.get(base_url + "/v2/health/live").status_code == 200


def test_chunked_body_over_the_limit_is_refused_without_reading_it_all(base_url):
    """The session server allows 1 MiB: the connection answers 413 once the limit passes."""
    with connect(base_url) as sock:
        reader = Reader(sock)
        sock.sendall(INFER + b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b" " * 65536
        try:
            for _ in range(40):  # 2.5 MiB offered
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, _, body = reader.response()
        assert status == 413 and "--http-max-input-size" in json.loads(body)["error"]


def test_client_leaving_mid_inference_cancels_it_and_the_server_serves_on(tmp_path):
    """A client that disconnects while its request waits in the queue: the request is
    dropped (never executed) and every other request is answered."""
    models = {
        "slow": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"400"}}]"""
    }
    with server_process(write_repository(tmp_path, models)) as server:
        base_url = f"http://{server.http_url}"
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1]}]}).encode()
        request = b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        first = connect(base_url)
        first.sendall(request)  # executes for 400 ms
        time.sleep(0.1)
        leaving = connect(base_url)
        leaving.sendall(request)  # queued behind the first
        time.sleep(0.1)
        leaving.close()
        assert Reader(first).response()[0] == 200
        first.close()
        time.sleep(0.5)
        stats = httpx.get(base_url + "/v2/models/slow/stats").json()["model_stats"][0]["inference_stats"]
        assert stats["success"]["count"] == 1
        assert httpx.post(base_url + "/v2/models/slow/infer", content=body, timeout=10).status_code == 200


@pytest.mark.parametrize("shape", ["many headers", "one endless header"])
def test_oversized_request_heads_are_refused(base_url, shape):
    with connect(base_url) as sock:
        sock.sendall(b"GET /v2 HTTP/1.1\r\nHost: x\r\n")
        try:
            if shape == "many headers":
                for i in range(2000):
                    sock.sendall(b"X-Filler-%d: %s\r\n" % (i, b"v" * 60))
            else:
                sock.sendall(b"X-Endless: ")
                for _ in range(100):
                    sock.sendall(b"v" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        reader = Reader(sock)
        status, _, body = reader.response()
        assert status == 400 and "larger than 65536 bytes" in json.loads(body)["error"]
    assert httpx.get(base_url + "/v2/health/live").status_code == 200
