"""naiad_wire's HTTP/2 server under a peer that sends and never reads, watched from outside:
it stops reading instead of buffering what it would send."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import hpack
import psutil
import pytest

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING = 0, 1, 4, 6
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


@pytest.fixture()
def server_without_ping_policing() -> Iterator[tuple[subprocess.Popen[str], int]]:
    script = Path(__file__).with_name("echo_http2_server.py")
    process = subprocess.Popen([sys.executable, str(script), "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process, int(process.stdout.readline())
    finally:
        process.kill()
        process.wait(10)


def answer_to(port: int, body: bytes) -> bytes:
    """What the server sends on a new connection for one request with `body`, once the echo
    of `body` is in it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        block = hpack.Encoder().encode(
            [(":method", "POST"), (":scheme", "http"), (":path", "/echo"), (":authority", "x")]
        )
        sock.sendall(
            PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, block) + frame(DATA, END_STREAM, 1, body)
        )
        received = b""
        while frame(DATA, 0, 1, body) not in received:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            received += chunk
        return received


def test_a_ping_flood_whose_answers_are_not_read_stops_being_read(server_without_ping_policing):
    """With ping policing off, answers to a flood that the client never reads would pile up;
    the server stops reading instead, and its memory stays put."""
    process, port = server_without_ping_policing
    watched = psutil.Process(process.pid)
    client = socket.create_connection(("127.0.0.1", port), timeout=60)
    client.sendall(PREFACE + frame(SETTINGS, 0, 0))
    before = watched.memory_info().rss
    burst = frame(PING, 0, 0, b"abcdefgh") * 60_000  # 1 MiB of pings
    sent = [0]

    def flood() -> None:
        try:
            for _ in range(400):  # 400 MiB if nothing stopped it
                client.sendall(burst)
                sent[0] += 1
        except OSError:
            pass

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    peak, last, still_since = before, -1, time.monotonic()
    while time.monotonic() - still_since < 1.5:
        peak = max(peak, watched.memory_info().rss)
        if sent[0] != last:
            last, still_since = sent[0], time.monotonic()
        time.sleep(0.05)
    growth_mb = (peak - before) / 2**20
    print(f"server RSS {before / 2**20:.0f} MB before, peak {peak / 2**20:.0f} MB after {sent[0]} MiB of pings")
    assert growth_mb < 64, f"the server grew by {growth_mb:.0f} MB"
    assert sent[0] < 400, "the server read the whole flood although no answer was read"
    client.close()
    assert frame(DATA, 0, 1, b"still here") in answer_to(port, b"still here")  # and it serves on
