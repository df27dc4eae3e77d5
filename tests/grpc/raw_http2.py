"""A raw HTTP/2 client over a socket, for tests that need frames no gRPC library would send:
tiny windows, CONTINUATION, padding, pings, garbage. Header blocks go through the `hpack`
package, an implementation independent of the server's."""

from __future__ import annotations

import socket
import struct
import time

import hpack

from naiad.protos import grpc_service_pb2 as pb

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
INFER = "/inference.GRPCInferenceService/ModelInfer"
MAX_FRAME = 16_384


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def grpc_message(message) -> bytes:
    payload = message.SerializeToString()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def identity_request(values: list[float] | None = None, model: str = "identity") -> pb.ModelInferRequest:
    import numpy as np

    data = np.asarray(values if values is not None else [1.0, 2.0, 3.0], np.float32)
    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[len(data)])
    request.raw_input_contents.append(data.tobytes())
    return request


class RawHttp2:
    def __init__(
        self, port: int, settings: dict[int, int] | None = None, preface: bytes = PREFACE, answer_pings: bool = True
    ) -> None:
        self.answer_pings = answer_pings
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # many small frames
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buffer = b""
        self.frames: list[tuple[int, int, int, bytes]] = []  # everything read, in order
        payload = b"".join(struct.pack(">HI", k, v) for k, v in (settings or {}).items())
        self.sock.sendall(preface + frame(SETTINGS, 0, 0, payload))

    def close(self) -> None:
        self.sock.close()

    def send(self, kind: int, flags: int, stream_id: int, payload: bytes = b"") -> None:
        self.sock.sendall(frame(kind, flags, stream_id, payload))

    def header_block(
        self, path: str = INFER, extra: list[tuple[str, str]] | None = None, method: str = "POST"
    ) -> bytes:
        return self.encoder.encode(
            [
                (":method", method),
                (":scheme", "http"),
                (":path", path),
                (":authority", "localhost"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                *(extra or []),
            ]
        )

    def call(self, stream_id: int, message, path: str = INFER, extra: list[tuple[str, str]] | None = None) -> None:
        self.send(HEADERS, END_HEADERS, stream_id, self.header_block(path, extra))
        self.send_body(stream_id, grpc_message(message))

    def send_body(self, stream_id: int, body: bytes, end_stream: bool = True) -> None:
        """`body` in DATA frames no larger than the server's SETTINGS_MAX_FRAME_SIZE (16 KiB)."""
        for offset in range(0, max(len(body), 1), MAX_FRAME):
            last = offset + MAX_FRAME >= len(body)
            self.send(DATA, END_STREAM if end_stream and last else 0, stream_id, body[offset : offset + MAX_FRAME])

    def read_frame(self, timeout: float = 10.0) -> tuple[int, int, int, bytes] | None:
        """The next frame, or None when the server closed the connection."""
        deadline = time.monotonic() + timeout
        while len(self.buffer) < 9 or len(self.buffer) < 9 + int.from_bytes(self.buffer[:3], "big"):
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        length = int.from_bytes(self.buffer[:3], "big")
        kind, flags = self.buffer[3], self.buffer[4]
        stream_id = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
        payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
        self.frames.append((kind, flags, stream_id, payload))
        if kind == SETTINGS and not flags & ACK:
            self.send(SETTINGS, ACK, 0)
        if kind == PING and not flags & ACK and self.answer_pings:
            self.send(PING, ACK, 0, payload)
        return kind, flags, stream_id, payload

    def response(self, stream_id: int, window_updates: bool = True, timeout: float = 10.0) -> dict:
        """Read until `stream_id` ends: its header blocks (decoded), its body, and the largest
        DATA frame. With window_updates, every DATA frame is given back to both windows."""
        blocks: list[list[tuple[str, str]]] = []
        body = b""
        largest = 0
        deadline = time.monotonic() + timeout
        while True:
            got = self.read_frame(max(0.01, deadline - time.monotonic()))
            assert got is not None, "the server closed the connection"
            kind, flags, sid, payload = got
            if kind == HEADERS:
                blocks.append(self.decoder.decode(payload))
            elif kind == DATA and sid == stream_id:
                body += payload
                largest = max(largest, len(payload))
                if window_updates and payload:
                    increment = struct.pack(">I", len(payload))
                    self.send(WINDOW_UPDATE, 0, 0, increment)
                    if not flags & END_STREAM:
                        self.send(WINDOW_UPDATE, 0, stream_id, increment)
            elif kind == RST_STREAM and sid == stream_id:
                return {"headers": blocks, "body": body, "reset": int.from_bytes(payload, "big"), "largest": largest}
            if sid == stream_id and flags & END_STREAM and kind in (HEADERS, DATA):
                return {"headers": blocks, "body": body, "largest": largest}

    def wait_for(self, kind: int, timeout: float = 10.0) -> tuple[int, int, int, bytes] | None:
        """Read frames until one of `kind` arrives (None if the connection closes first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.read_frame(max(0.01, deadline - time.monotonic()))
            if got is None or got[0] == kind:
                return got
        raise TimeoutError(f"no frame of type {kind} within {timeout}s")


def reset_code(client: RawHttp2, stream_id: int) -> int:
    """The error code of the RST_STREAM the server sends for `stream_id` (a stream error: no
    GOAWAY before it)."""
    while True:
        got = client.read_frame()
        assert got is not None, "the connection closed instead of the stream"
        kind, _, sid, payload = got
        assert kind != GOAWAY, f"GOAWAY {payload!r} instead of a stream error"
        if kind == RST_STREAM and sid == stream_id:
            return int.from_bytes(payload, "big")


def goaway_code(client: RawHttp2) -> int:
    """The error code of the GOAWAY the server sends, after which it closes the connection."""
    goaway = client.wait_for(GOAWAY)
    assert goaway is not None, "the connection closed without GOAWAY"
    assert client.read_frame(timeout=5) is None  # and then it closes
    return int.from_bytes(goaway[3][4:8], "big")


def grpc_status(response: dict) -> tuple[int, str]:
    fields = dict(response["headers"][-1])
    return int(fields["grpc-status"]), fields.get("grpc-message", "")


def infer_response(response: dict) -> pb.ModelInferResponse:
    body = response["body"]
    assert body[0] == 0 and int.from_bytes(body[1:5], "big") == len(body) - 5
    return pb.ModelInferResponse.FromString(body[5:])
