"""What naiad's HTTP/1.1 server holds against clients that do not play along: one that
pipelines large requests and never reads its answers (back-pressure keeps the server's memory
bounded), one that sends half a request head (timed out with 408), and one that stays
idle (closed after the keep-alive timeout)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import psutil
import pytest
from http_servers import MODELS, server_process, start_server, write_repository
from test_http1_server import Reader, connect

TIMEOUT_S = 1.0


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


def test_timeouts_must_be_positive(tmp_path):
    process = server_process(write_repository(tmp_path, {}), "--http-header-read-timeout", "0")
    process.start(expect_ready=False)
    try:
        assert process.wait(60) != 0
        assert "--http-header-read-timeout must be positive" in process.log()
    finally:
        process.stop()
