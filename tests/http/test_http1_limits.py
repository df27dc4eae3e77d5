"""What naiad's HTTP/1.1 server holds against clients that do not play along: one that
pipelines large requests and never reads its answers (back-pressure keeps the server's memory
bounded), one that sends half a request head (timed out with 408), one that stays idle
(closed after the keep-alive timeout), one that stops sending its body (408), one that
declares a body over the limit (413 before it is sent), many uploads that stall (the server's
memory stays within its budget, and comes back when they close), and one that never reads a
large answer (dropped after the write timeout)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient
from http_servers import MODELS, server_process, start_server, write_repository
from test_http1_server import Reader, connect
from tritonclient.utils import InferenceServerException

TIMEOUT_S = 1.0
MiB = 1 << 20
# Linux's TCP state after a reset (tcp_states.h), the first byte of TCP_INFO.
TCP_CLOSE = 7


@pytest.fixture(scope="module")
def limits_server(tmp_path_factory):
    repository = write_repository(tmp_path_factory.mktemp("limits"), {"identity": MODELS["identity"]})
    process = start_server(
        repository,
        "--http-max-input-size",
        str(4 << 20),
        "--http-header-read-timeout",
        str(TIMEOUT_S),
        "--http-keepalive-timeout",
        str(TIMEOUT_S),
        "--http-body-read-timeout",
        str(TIMEOUT_S),
    )
    yield process
    process.__exit__()


@pytest.fixture(scope="module")
def budget_server(tmp_path_factory):
    """Bodies up to 8 MiB, 16 MiB of them held at once, answers left unread dropped after 1 s."""
    repository = write_repository(tmp_path_factory.mktemp("budget"), {"identity": MODELS["identity"]})
    process = start_server(
        repository,
        "--http-max-input-size",
        str(8 * MiB),
        "--http-max-buffered-bytes",
        str(16 * MiB),
        "--http-write-timeout",
        str(TIMEOUT_S),
    )
    yield process
    process.__exit__()


def binary_infer(values: np.ndarray) -> bytes:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [len(values)],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": values.nbytes},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    return (
        b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: %d\r\n"
        b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
        % (len(header), len(header) + values.nbytes)
        + header
        + values.tobytes()
    )


def binary_output(headers: dict[str, str], body: bytes) -> np.ndarray:
    return np.frombuffer(body[int(headers["inference-header-content-length"]) :], np.float32)


def rss(process) -> int:
    return psutil.Process(process.process.pid).memory_info().rss


def test_pipelining_client_that_never_reads_does_not_grow_the_server(limits_server):
    """200 pipelined 2 MiB requests, no answer read: the server stops reading instead of
    buffering 400 MiB of requests and answers; once the client reads, every answer is right."""
    count = 200
    values = np.random.default_rng(0).random(1 << 19, dtype=np.float32)  # 2 MiB
    url = f"http://{limits_server.http_url}"
    with connect(url) as sock:  # warm up: the first answers grow the allocator's arenas once
        reader = Reader(sock)
        for _ in range(3):
            sock.sendall(binary_infer(values))
            reader.response()
    baseline = rss(limits_server)

    sock = connect(url)
    sock.settimeout(120)
    sent = [0]

    def send_all() -> None:
        for index in range(count):
            values[0] = index
            sock.sendall(binary_infer(values))
            sent[0] += 1

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    peak = baseline
    last, still_since = -1, time.monotonic()
    while time.monotonic() - still_since < 1.5:  # until the sender has been blocked 1.5 s
        peak = max(peak, rss(limits_server))
        if sent[0] != last:
            last, still_since = sent[0], time.monotonic()
        time.sleep(0.05)
    growth_mb = (peak - baseline) / 2**20
    print(f"server RSS {baseline / 2**20:.0f} MB before, peak {peak / 2**20:.0f} MB while {sent[0]} requests were sent")
    assert growth_mb < 64, f"the server grew by {growth_mb:.0f} MB"
    assert sent[0] < count, "the server read every request although no answer was read"

    reader = Reader(sock)
    for index in range(count):
        status, headers, body = reader.response()
        assert status == 200
        output = binary_output(headers, body)
        assert output[0] == index and np.array_equal(output[1:], values[1:])
    sender.join(30)
    sock.close()


def test_a_half_sent_request_head_gets_408_and_the_connection_closes(limits_server):
    with connect(f"http://{limits_server.http_url}") as sock:
        start = time.monotonic()
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        reader = Reader(sock)
        status, _, body = reader.response()
        assert status == 408 and b"not received within 1 s" in body
        assert reader.closed()
        assert TIMEOUT_S - 0.1 < time.monotonic() - start < TIMEOUT_S + 3


def test_a_head_sent_over_two_requests_time_is_timed_out_from_its_first_byte(limits_server):
    """On a kept-alive connection the clock starts with the next request's first byte."""
    with connect(f"http://{limits_server.http_url}") as sock:
        reader = Reader(sock)
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reader.response()[0] == 200
        time.sleep(TIMEOUT_S / 2)
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\n")  # half a head; then nothing
        start = time.monotonic()
        assert reader.response()[0] == 408
        assert time.monotonic() - start > TIMEOUT_S - 0.1


def test_silent_and_idle_connections_are_closed(limits_server):
    url = f"http://{limits_server.http_url}"
    with connect(url) as silent, connect(url) as idle:
        reader = Reader(idle)
        idle.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reader.response()[0] == 200
        start = time.monotonic()
        assert Reader(silent).closed() and reader.closed()
        assert time.monotonic() - start < TIMEOUT_S + 3
    with connect(url) as sock:  # and the server serves on
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert Reader(sock).response()[0] == 200


def test_an_upload_that_stops_gets_408_and_the_connection_closes(limits_server):
    """The head and 1000 bytes of a 1 MiB body, then nothing."""
    with connect(f"http://{limits_server.http_url}") as sock:
        start = time.monotonic()
        sock.sendall(
            b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % MiB + b" " * 1000
        )
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert status == 408 and headers["content-type"] == "application/json"
        assert json.loads(body) == {"error": "no part of the request body arrived for 1 s"}
        assert reader.closed()
        assert TIMEOUT_S - 0.1 < time.monotonic() - start < TIMEOUT_S + 3


def test_a_content_length_over_the_limit_is_refused_at_the_head(limits_server):
    """413 with the Triton-style JSON error, before a byte of the body is sent."""
    with connect(f"http://{limits_server.http_url}") as sock:
        sock.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert status == 413 and headers["content-type"] == "application/json"
        assert json.loads(body) == {
            "error": f"the request body is larger than the {4 << 20} bytes --http-max-input-size allows "
            "(1000000000 bytes or more)"
        }
        assert reader.closed()


def test_tritonclient_sees_the_413_as_an_error_naming_the_limit(limits_server):
    client = httpclient.InferenceServerClient(limits_server.http_url)
    values = np.zeros(5 * MiB // 4, np.float32)  # 5 MiB; the server allows 4
    infer_input = httpclient.InferInput("INPUT0", [len(values)], "FP32")
    infer_input.set_data_from_numpy(values)
    with pytest.raises(InferenceServerException) as raised:
        client.infer("identity", [infer_input])
    assert raised.value.status() == "413" and "--http-max-input-size" in raised.value.message()
    client.close()


def stalled_uploads(url: str, count: int, size: int, sent: int) -> list[socket.socket]:
    """`count` connections that declare a body of `size` bytes, send `sent` of it (what the
    server and the kernel take within a second) and stop."""
    host, port = url.rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]
    payload = memoryview(b"u" * sent)
    done = [0] * count
    for sock in socks:
        sock.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
        sock.setblocking(False)
    last_change = time.monotonic()
    while time.monotonic() - last_change < 1.0:
        for index, sock in enumerate(socks):
            with contextlib.suppress(BlockingIOError):
                moved = sock.send(payload[done[index] :]) if done[index] < sent else 0
                if moved:
                    done[index] += moved
                    last_change = time.monotonic()
        time.sleep(0.01)
    return socks


def test_stalled_uploads_hold_the_server_to_its_budget_and_give_the_memory_back(budget_server):
    """The audit's case, scaled down: 12 uploads of 8 MiB stop at 7 MiB. Without the budget
    the server held all 84 MiB; with 16 MiB it holds about that (plus one body the server
    lets finish), and when the clients close, its memory is back where it was."""
    url = budget_server.http_url
    with connect(f"http://{url}") as sock:  # warm up: the first answers grow the allocator's arenas once
        reader = Reader(sock)
        for _ in range(3):
            sock.sendall(binary_infer(np.zeros(MiB, np.float32)))
            assert reader.response()[0] == 200
    time.sleep(0.2)
    baseline = rss(budget_server)
    socks = stalled_uploads(url, 12, 8 * MiB, 7 * MiB)
    peak = max(rss(budget_server) for _ in range(5) if time.sleep(0.05) is None)
    growth_mb = (peak - baseline) / MiB
    print(f"server RSS {baseline / MiB:.0f} MB before, {peak / MiB:.0f} MB with 12 stalled uploads")
    assert growth_mb < 48, f"the server grew by {growth_mb:.0f} MB"
    for sock in socks:
        sock.close()
    deadline = time.monotonic() + 5
    while (rss(budget_server) - baseline) / MiB > 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    after_mb = (rss(budget_server) - baseline) / MiB
    assert after_mb <= 8, f"the server still holds {after_mb:.0f} MB more than before"
    with connect(f"http://{url}") as sock:  # and serves on
        sock.sendall(binary_infer(np.ones(4, np.float32)))
        assert Reader(sock).response()[0] == 200


def test_a_client_that_never_reads_a_large_answer_is_dropped(budget_server):
    """Three pipelined requests whose answers (18 MiB) are never read: the connection is
    reset after the write timeout (the client sees the reset at once), and the answers with it."""
    values = np.random.default_rng(1).random(6 * MiB // 4, dtype=np.float32)
    with connect(f"http://{budget_server.http_url}") as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        start = time.monotonic()
        # The server stops reading while its answers do not leave: the send may end in the reset.
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(binary_infer(values) * 3)
        time.sleep(max(0.0, start + TIMEOUT_S + 2 - time.monotonic()))
        # Reset, not closed gracefully: a graceful close would leave the kernel holding the
        # unsent answer for minutes, and this client, reading nothing, would never learn.
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE
        received = 0
        sock.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        assert received < 3 * values.nbytes, "every answer arrived: the connection was kept"
    with connect(f"http://{budget_server.http_url}") as sock:  # and the server serves on
        sock.sendall(binary_infer(values))
        status, headers, body = Reader(sock).response()
        assert status == 200 and np.array_equal(binary_output(headers, body), values)


def test_timeouts_must_be_positive(tmp_path):
    process = server_process(write_repository(tmp_path, {}), "--http-header-read-timeout", "0")
    process.start(expect_ready=False)
    try:
        assert process.wait(60) != 0
        assert "--http-header-read-timeout must be positive" in process.log()
    finally:
        process.stop()
