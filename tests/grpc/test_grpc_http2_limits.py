"""What one HTTP/2 connection may cost the server: its open streams are bounded
(SETTINGS_MAX_CONCURRENT_STREAMS), a PING flood is policed (a flood whose answers are not
read stops being read: wire/tests/test_http2_back_pressure.py); a frame of many tiny gRPC messages costs time linear in its size and does
not stall other clients; a connection that never completes its handshake, or stays idle, is
closed. Raw frames, since no gRPC library sends these."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
import tritonclient.grpc as tg
from grpc_servers import numpy_server, write_repository
from raw_http2 import (
    END_HEADERS,
    GOAWAY,
    HEADERS,
    PING,
    RST_STREAM,
    SETTINGS,
    RawHttp2,
    frame,
    grpc_message,
    grpc_status,
    identity_request,
    infer_response,
)

STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"
REFUSED_STREAM, ENHANCE_YOUR_CALM = 0x7, 0xB
MAX_STREAMS = 10
MAX_RESETS = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("limits"), ["identity"])
    flags = [
        "--grpc-max-concurrent-streams",
        str(MAX_STREAMS),
        "--grpc-handshake-timeout",
        "500",
        "--grpc-max-connection-idle",
        "1000",
        "--grpc-max-stream-resets",
        str(MAX_RESETS),
    ]
    with numpy_server(repo, *flags) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


def port_of(process) -> int:
    return int(process.grpc_url.rsplit(":", 1)[1])


def server_settings(client: RawHttp2) -> dict[int, int]:
    kind, flags, _, payload = client.read_frame()
    assert kind == SETTINGS and not flags
    return {key: value for key, value in struct.iter_unpack(">HI", payload)}


def test_streams_past_the_limit_are_refused_and_the_open_ones_are_served(server):
    client = RawHttp2(port_of(server))
    try:
        assert server_settings(client)[0x3] == MAX_STREAMS
        count = 5000  # each opens a call and sends no body
        client.sock.sendall(
            b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, client.header_block()) for i in range(count))
        )
        refused = set()
        while len(refused) < count - MAX_STREAMS:
            kind, _, stream_id, payload = client.read_frame()
            if kind == RST_STREAM:
                assert int.from_bytes(payload, "big") == REFUSED_STREAM
                refused.add(stream_id)
        assert refused == {2 * index + 1 for index in range(MAX_STREAMS, count)}
        for index in range(MAX_STREAMS):  # the streams kept are whole calls
            stream_id = 2 * index + 1
            client.send_body(stream_id, grpc_message(identity_request([float(index)])))
            assert grpc_status(client.response(stream_id)) == (0, "")
    finally:
        client.close()


def test_the_default_limit_is_advertised(tmp_path):
    with numpy_server(write_repository(tmp_path, ["identity"])) as process:
        client = RawHttp2(port_of(process))
        try:
            assert server_settings(client)[0x3] == 1000
        finally:
            client.close()


def test_a_client_that_opens_and_resets_streams_past_the_bound_gets_goaway(server):
    """HTTP/2 "rapid reset" (CVE-2023-44487): calls started and cancelled at once never fill
    MAX_CONCURRENT_STREAMS; past --grpc-max-stream-resets the connection is closed, and the
    server serves other clients on."""
    client = RawHttp2(port_of(server))
    cancel = (0x8).to_bytes(4, "big")
    try:
        opened_and_reset = b"".join(
            frame(HEADERS, END_HEADERS, 2 * i + 1, client.header_block()) + frame(RST_STREAM, 0, 2 * i + 1, cancel)
            for i in range(MAX_RESETS)
        )
        client.sock.sendall(opened_and_reset)
        client.send(PING, 0, 0, b"still ok")  # the bound itself is allowed
        answer = client.wait_for(PING)
        assert answer is not None and answer[3] == b"still ok"
        stream_id = 2 * MAX_RESETS + 1
        client.sock.sendall(
            frame(HEADERS, END_HEADERS, stream_id, client.header_block()) + frame(RST_STREAM, 0, stream_id, cancel)
        )
        goaway = client.wait_for(GOAWAY)
        assert goaway is not None, "the connection closed without GOAWAY"
        assert int.from_bytes(goaway[3][4:8], "big") == ENHANCE_YOUR_CALM and goaway[3][8:] == b"too_many_resets"
        assert client.read_frame(timeout=5) is None
    finally:
        client.close()
    with tg.InferenceServerClient(server.grpc_url) as other:
        assert other.is_server_live()


def test_pings_are_policed_while_a_call_is_open(server):
    """gRPC's policy counts pings with calls open too: an open call is no licence to flood."""
    client = RawHttp2(port_of(server))
    try:
        client.send(HEADERS, END_HEADERS, 1, client.header_block())  # a call that stays open
        client.sock.sendall(frame(PING, 0, 0, b"abcdefgh") * 10)
        goaway = client.wait_for(GOAWAY)
        assert int.from_bytes(goaway[3][4:8], "big") == ENHANCE_YOUR_CALM and goaway[3][8:] == b"too_many_pings"
    finally:
        client.close()


def test_many_empty_messages_on_a_unary_call_do_not_stall_other_clients(server):
    """52,000 empty gRPC messages (256 KiB) on a unary call, while another connection checks
    health: the check answers at once, and the call ends at the second message. (On a
    client-streaming call, see test_a_frame_of_many_messages_is_split_in_linear_time.)"""
    path = "/inference.GRPCInferenceService/ModelInfer"
    count = 52_000
    body = b"\x00\x00\x00\x00\x00" * count
    latencies: list[float] = []
    done = threading.Event()
    with tg.InferenceServerClient(server.grpc_url) as health:
        health.is_server_live()

        def check() -> None:
            while not done.is_set():
                start = time.perf_counter()
                assert health.is_server_live()
                latencies.append(time.perf_counter() - start)

        client = RawHttp2(port_of(server))  # opened now: the server closes idle connections after 1 s
        checker = threading.Thread(target=check, daemon=True)
        try:
            client.send(HEADERS, END_HEADERS, 1, client.header_block(path=path))
            checker.start()
            time.sleep(0.1)
            start = time.perf_counter()
            client.send_body(1, body)
            response = client.response(1, timeout=30)
            elapsed = time.perf_counter() - start
            time.sleep(0.1)
        finally:
            done.set()
            if checker.is_alive():
                checker.join(10)
            client.close()
    worst = max(latencies)
    print(
        f"{path}: call ended after {elapsed * 1000:.0f} ms; {len(latencies)} health checks, slowest {worst * 1000:.1f} ms"
    )
    assert grpc_status(response)[0] == 13  # INTERNAL: more than one request message
    assert worst < 0.5  # answered at once; a margin for a loaded machine


@pytest.mark.parametrize("sent", [b"", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], ids=["nothing", "preface only"])
def test_a_connection_that_never_completes_its_handshake_is_closed(server, sent):
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(sent)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        elapsed = time.monotonic() - start
    kinds = {}
    while received:  # the server's SETTINGS and WINDOW_UPDATE, then GOAWAY
        length = int.from_bytes(received[:3], "big")
        kinds[received[3]] = received[9 : 9 + length]
        received = received[9 + length :]
    assert int.from_bytes(kinds[GOAWAY][4:8], "big") == 0x1  # PROTOCOL_ERROR
    assert 0.4 < elapsed < 4


def test_an_idle_connection_gets_goaway_but_not_while_a_call_is_open(server):
    client = RawHttp2(port_of(server))
    try:
        client.call(1, identity_request([1.0]))
        assert grpc_status(client.response(1)) == (0, "")
        idle_since = time.monotonic()
        goaway = client.wait_for(GOAWAY, timeout=5)
        assert int.from_bytes(goaway[3][4:8], "big") == 0  # NO_ERROR: a client just reconnects
        assert 0.9 < time.monotonic() - idle_since < 4
    finally:
        client.close()
    client = RawHttp2(port_of(server))
    try:
        client.send(HEADERS, END_HEADERS, 1, client.header_block())  # open for 2 s, past the idle limit
        deadline = time.monotonic() + 2
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                got = client.read_frame(timeout=remaining)
            except TimeoutError:
                break
            assert got is not None and got[0] != GOAWAY
        client.send_body(1, grpc_message(identity_request([3.0])))
        response = client.response(1)
        assert grpc_status(response) == (0, "") and infer_response(response).raw_output_contents
    finally:
        client.close()


class _Transport:
    """The connection's I/O boundary, without a socket: collects what it writes."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None: ...

    def abort(self) -> None: ...


def test_a_frame_of_many_messages_is_split_in_linear_time():
    """One 1 MB DATA frame (a peer allowed 1 MiB frames) of 200,000 empty messages on a
    client-streaming call reaches the method, every message, in well under three seconds
    (several when every message copied the rest of the buffer), and the event loop is never
    held long meanwhile: the messages are handed over a millisecond's worth at a time."""
    import asyncio

    import hpack

    from naiad.frontends.grpc.rpc import RpcDispatcher, RpcMethod, RpcSettings
    from naiad.protos import grpc_service_pb2 as pb
    from naiad_wire.http2 import PREFACE, Http2Limits
    from naiad_wire.http2_protocol import Http2Connection

    count = 200_000
    received = [0]  # counted, not kept: 200,000 messages kept would make the collector the stall

    async def consume(requests, context):
        async for message in requests:
            assert not message.model_name
            received[0] += 1
        return pb.ModelInferResponse()

    async def main() -> tuple[float, float]:
        method = RpcMethod(STREAM_INFER, consume, pb.ModelInferRequest, client_streaming=True)
        connection = Http2Connection(
            RpcDispatcher({STREAM_INFER: method}, RpcSettings()), Http2Limits(max_frame_size=1 << 20), set()
        )
        connection.connection_made(_Transport())  # type: ignore[arg-type]
        headers = hpack.Encoder().encode(
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", STREAM_INFER),
                (":authority", "x"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ]
        )
        connection.data_received(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, headers))
        data = frame(0, 0, 1, b"\x00\x00\x00\x00\x00" * count)  # DATA
        start = last = time.perf_counter()
        longest = 0.0
        connection.data_received(data)
        while received[0] < count and last - start < 30:  # a ticker: how long is the loop held?
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
        connection.abort()
        return last - start, longest

    elapsed, longest = asyncio.run(main())
    print(
        f"{count} messages in one frame taken by the method in {elapsed * 1000:.0f} ms; "
        f"the loop was held {longest * 1000:.1f} ms at most"
    )
    assert received[0] == count
    assert elapsed < 3.0
    assert longest < 0.25  # about a millisecond; a margin for a loaded machine


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_concurrent_streams", 0, "--grpc-max-concurrent-streams must be at least 1"),
        ("max_stream_resets", -1, "--grpc-max-stream-resets must not be negative"),
        ("handshake_timeout_ms", -1, "--grpc-handshake-timeout must not be negative"),
        ("max_connection_idle_ms", -5, "--grpc-max-connection-idle must not be negative"),
    ],
)
def test_bad_limits_are_refused_naming_the_flag(field, value, message):
    from naiad.frontends.grpc.server import http2_limits
    from naiad.frontends.options import GrpcOptions

    with pytest.raises(ValueError, match=message):
        http2_limits(GrpcOptions(**{field: value}))
