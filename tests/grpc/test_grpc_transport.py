"""naiad's own HTTP/2 + gRPC transport, frame by frame: what tritonclient never sends (tiny
windows, CONTINUATION, padding, ping floods, garbage, deadlines without a client-side
timer) gets the answer RFC 9113 and gRPC's protocol prescribe, and the server keeps serving."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest
import tritonclient.grpc as tg
from grpc_servers import numpy_server, write_repository
from raw_http2 import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    INFER,
    PADDED,
    PING,
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    RawHttp2,
    grpc_message,
    grpc_status,
    identity_request,
    infer_response,
)

SLEEPY = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"1500"}}]"""


@pytest.fixture(scope="module")
def transport_server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("transport"), ["identity"])
    (repo / "sleepy" / "1").mkdir(parents=True)
    (repo / "sleepy" / "config.pbtxt").write_text(SLEEPY)
    with numpy_server(repo) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


@pytest.fixture()
def port(transport_server):
    return int(transport_server.grpc_url.rsplit(":", 1)[1])


def still_serving(url: str) -> None:
    with tg.InferenceServerClient(url) as client:
        assert client.is_server_live()


# -- flow control and framing --------------------------------------------------------------


def test_response_respects_a_tiny_client_window(port):
    """With a 1000-byte stream window and 16 KiB frames, a 400 kB answer arrives in frames
    no larger than the window allows, and whole."""
    values = np.arange(100_000, dtype=np.float32)
    client = RawHttp2(port, settings={0x4: 1000})
    try:
        client.call(1, identity_request(list(values)))
        response = client.response(1)
        assert grpc_status(response) == (0, "")
        assert response["largest"] <= 1000
        result = infer_response(response)
        np.testing.assert_array_equal(np.frombuffer(result.raw_output_contents[0], np.float32), values)
    finally:
        client.close()


def test_continuation_padding_and_priority_are_understood(port):
    client = RawHttp2(port)
    try:
        block = client.header_block(INFER)
        priority = b"\x00\x00\x00\x00\x10"  # depends on stream 0, weight 16
        client.send(HEADERS, PRIORITY_FLAG, 1, priority + block[:5])
        client.send(CONTINUATION, 0, 1, block[5:9])
        client.send(CONTINUATION, END_HEADERS, 1, block[9:])
        message = grpc_message(identity_request([4.0, 5.0]))
        client.send(DATA, PADDED, 1, bytes([7]) + message[:6] + b"\x00" * 7)
        client.send(DATA, END_STREAM, 1, message[6:])
        response = client.response(1)
        assert grpc_status(response) == (0, "")
        assert np.frombuffer(infer_response(response).raw_output_contents[0], np.float32).tolist() == [4.0, 5.0]
    finally:
        client.close()


def test_many_streams_on_one_connection_interleave(port):
    client = RawHttp2(port)
    try:
        for stream_id in range(1, 40, 2):
            client.send(HEADERS, END_HEADERS, stream_id, client.header_block(INFER))
        for stream_id in reversed(range(1, 40, 2)):
            client.send(DATA, END_STREAM, stream_id, grpc_message(identity_request([float(stream_id)])))
        answers = {}
        while len(answers) < 20:
            kind, flags, stream_id, payload = client.read_frame()
            if kind == DATA:
                answers[stream_id] = pb_values(payload)
        assert answers == {sid: [float(sid)] for sid in range(1, 40, 2)}
    finally:
        client.close()


def pb_values(body: bytes) -> list[float]:
    return np.frombuffer(infer_response({"body": body}).raw_output_contents[0], np.float32).tolist()


# -- gRPC protocol -------------------------------------------------------------------------


def test_unknown_method_and_wrong_content_type(port):
    client = RawHttp2(port)
    try:
        client.call(1, identity_request(), path="/inference.GRPCInferenceService/NoSuchRpc")
        assert grpc_status(client.response(1)) == (12, "Method not found: /inference.GRPCInferenceService/NoSuchRpc")
        client.send(HEADERS, END_HEADERS | END_STREAM, 3, client.header_block(INFER, method="GET"))
        assert dict(client.response(3)["headers"][0])[":status"] == "405"
        client.call(5, identity_request(), extra=[("grpc-encoding", "br")])
        status, message = grpc_status(client.response(5))
        assert (status, message) == (12, "Compression algorithm 'br' is not supported")
    finally:
        client.close()


def test_unparsable_message_is_internal(port):
    client = RawHttp2(port)
    try:
        client.send(HEADERS, END_HEADERS, 1, client.header_block(INFER))
        client.send(DATA, END_STREAM, 1, b"\x00\x00\x00\x00\x03\xff\xff\xff")
        status, message = grpc_status(client.response(1))
        assert status == 13 and "failed to parse the request message" in message
    finally:
        client.close()


def test_grpc_timeout_ends_a_slow_call_with_deadline_exceeded(port, transport_server):
    """The server keeps the deadline itself: no client-side timer is running here."""
    client = RawHttp2(port)
    try:
        started = time.monotonic()
        client.call(1, identity_request(model="sleepy"), extra=[("grpc-timeout", "200m")])
        response = client.response(1)
        assert grpc_status(response) == (4, "Deadline Exceeded")
        assert time.monotonic() - started < 1.4  # the model sleeps 1.5 s
    finally:
        client.close()
    still_serving(transport_server.grpc_url)


def test_client_reset_cancels_the_call(port, transport_server):
    client = RawHttp2(port)
    try:
        client.call(1, identity_request(model="sleepy"))
        client.send(RST_STREAM, 0, 1, struct.pack(">I", 8))  # CANCEL
        client.call(3, identity_request([9.0]))
        response = client.response(3)
        assert pb_values(response["body"]) == [9.0]
        assert not [f for f in client.frames if f[2] == 1 and f[0] in (HEADERS, DATA)]
    finally:
        client.close()
    still_serving(transport_server.grpc_url)


# -- connection errors and policies --------------------------------------------------------


def test_garbage_gets_goaway_and_the_server_keeps_serving(port, transport_server):
    client = RawHttp2(port, preface=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        goaway = client.wait_for(GOAWAY)
        assert goaway is not None and int.from_bytes(goaway[3][4:8], "big") == 1  # PROTOCOL_ERROR
        assert client.read_frame(timeout=5) is None  # and the connection is closed
    finally:
        client.close()
    still_serving(transport_server.grpc_url)


def test_frame_on_a_stream_that_was_never_opened_is_a_connection_error(port):
    client = RawHttp2(port)
    try:
        client.send(DATA, 0, 7, b"abc")
        goaway = client.wait_for(GOAWAY)
        assert int.from_bytes(goaway[3][4:8], "big") == 1
    finally:
        client.close()


def test_ping_is_answered_and_a_ping_flood_is_stopped(port):
    """gRPC's default policy: without calls, more than two pings inside five minutes are
    strikes, and the third strike ends the connection with ENHANCE_YOUR_CALM."""
    client = RawHttp2(port)
    try:
        client.send(PING, 0, 0, b"12345678")
        ack = client.wait_for(PING)
        assert ack[1] == 1 and ack[3] == b"12345678"
        for _ in range(3):
            client.send(PING, 0, 0, b"abcdefgh")
        goaway = client.wait_for(GOAWAY)
        assert int.from_bytes(goaway[3][4:8], "big") == 0xB and goaway[3][8:] == b"too_many_pings"
    finally:
        client.close()


def test_keepalive_pings_and_connection_age(tmp_path):
    repo = write_repository(tmp_path, ["identity"])
    flags = [
        "--grpc-keepalive-time",
        "200",
        "--grpc-keepalive-timeout",
        "400",
        "--grpc-keepalive-permit-without-calls",
        "true",
        "--grpc-http2-max-pings-without-data",
        "0",
        "--grpc-max-connection-age",
        "1500",
        "--grpc-max-connection-age-grace",
        "500",
    ]
    with numpy_server(repo, *flags) as server:
        port = int(server.grpc_url.rsplit(":", 1)[1])
        # A client that never answers pings is closed after the keepalive timeout.
        silent = RawHttp2(port, answer_pings=False)
        try:
            ping = silent.wait_for(PING, timeout=5)
            assert ping is not None and ping[1] == 0
            deadline = time.monotonic() + 5
            while silent.read_frame(timeout=max(0.01, deadline - time.monotonic())) is not None:
                pass
        finally:
            silent.close()
        # A connection that reaches its maximum age gets GOAWAY; tritonclient reconnects.
        aged = RawHttp2(port)
        try:
            goaway = aged.wait_for(GOAWAY, timeout=5)
            assert int.from_bytes(goaway[3][4:8], "big") == 0
        finally:
            aged.close()
        with tg.InferenceServerClient(server.grpc_url) as client:
            tensor = tg.InferInput("INPUT0", [2], "FP32")
            tensor.set_data_from_numpy(np.array([1, 2], np.float32))
            deadline = time.monotonic() + 4
            calls = 0
            while time.monotonic() < deadline:
                assert client.infer("identity", [tensor]).as_numpy("OUTPUT0").tolist() == [1, 2]
                calls += 1
                time.sleep(0.05)
            assert calls > 20


def test_plain_http1_client_is_refused_cleanly(port, transport_server):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    kinds = []
    while len(received) >= 9:  # the server's SETTINGS, then GOAWAY
        length = int.from_bytes(received[:3], "big")
        kinds.append(received[3])
        received = received[9 + length :]
    assert kinds[-1] == GOAWAY
    still_serving(transport_server.grpc_url)


def test_a_client_without_a_dynamic_table_can_read_every_answer(port):
    """SETTINGS_HEADER_TABLE_SIZE 0: the server's next header block starts with a table size
    update, which a strict decoder (hpack's, here, with its limit at 0) requires."""
    client = RawHttp2(port, settings={0x1: 0})
    client.decoder.max_allowed_table_size = 0
    try:
        while not ((frame := client.read_frame())[0] == SETTINGS and frame[1] & ACK):
            pass  # until the server acknowledges our settings
        for stream_id in (1, 3):
            client.call(stream_id, identity_request([float(stream_id)]))
            response = client.response(stream_id)
            assert grpc_status(response) == (0, "") and pb_values(response["body"]) == [float(stream_id)]
    finally:
        client.close()
