"""RFC 9113 and RFC 7541 rules the HTTP/2 server enforces, one raw-frame test each: the cases
h2spec (summerwind/h2spec) checks and naiad once failed. A malformed request is a stream
error (RST_STREAM PROTOCOL_ERROR) and the connection serves on; a broken connection-level rule
is GOAWAY with the code the RFC names. `scripts/h2spec.sh` runs h2spec itself."""

from __future__ import annotations

import struct

import pytest
from grpc_servers import numpy_server, write_repository
from raw_http2 import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    INFER,
    PADDED,
    PING,
    PRIORITY,
    PRIORITY_FLAG,
    SETTINGS,
    WINDOW_UPDATE,
    RawHttp2,
    frame,
    goaway_code,
    grpc_message,
    grpc_status,
    identity_request,
    infer_response,
    reset_code,
)

from naiad_wire.header_compression import HeaderCompressionError, HeaderDecoder

PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR = 0x1, 0x3, 0x6, 0x9
REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", INFER),
    (":authority", "localhost"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    with numpy_server(write_repository(tmp_path_factory.mktemp("rules"), ["identity"])) as process:
        yield int(process.grpc_url.rsplit(":", 1)[1])
        assert "Traceback" not in process.log(), process.log()


@pytest.fixture()
def client(port):
    raw = RawHttp2(port)
    yield raw
    raw.close()


def serves_on(client: RawHttp2, stream_id: int) -> None:
    client.call(stream_id, identity_request([7.0]))
    response = client.response(stream_id)
    assert grpc_status(response) == (0, "")
    assert list(infer_response(response).raw_output_contents[0]) == list(struct.pack("<f", 7.0))


def without(name: str) -> list[tuple[str, str]]:
    return [field for field in REQUEST if field[0] != name]


MALFORMED = {
    "uppercase field name": REQUEST + [("X-Upper", "1")],
    "connection-specific field": REQUEST + [("connection", "keep-alive")],
    "transfer-encoding": REQUEST + [("transfer-encoding", "chunked")],
    "te other than trailers": without("te") + [("te", "gzip")],
    "pseudo-header after a regular field": without(":authority") + [(":authority", "localhost")],
    "unknown pseudo-header": [(":foo", "bar")] + REQUEST,
    "response pseudo-header": [(":status", "200")] + REQUEST,
    "duplicate :method": [(":method", "POST")] + REQUEST,
    "duplicate :scheme": [(":scheme", "http")] + REQUEST,
    "duplicate :path": [(":path", INFER)] + REQUEST,
    "no :method": without(":method"),
    "no :scheme": without(":scheme"),
    "no :path": without(":path"),
    "empty :path": [(":path", "") if name == ":path" else (name, value) for name, value in REQUEST],
    "content-length not a number": REQUEST + [("content-length", "x1")],
}


@pytest.mark.parametrize("headers", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_request_headers_are_a_stream_error(client, headers):
    client.send(HEADERS, END_HEADERS | END_STREAM, 1, client.encoder.encode(headers))
    assert reset_code(client, 1) == PROTOCOL_ERROR
    serves_on(client, 3)


@pytest.mark.parametrize("frames", [1, 2])
def test_a_body_that_differs_from_its_content_length_is_a_stream_error(client, frames):
    client.send(HEADERS, END_HEADERS, 1, client.encoder.encode(REQUEST + [("content-length", "1")]))
    if frames == 2:
        client.send(DATA, 0, 1, b"test")
    client.send(DATA, END_STREAM, 1, b"test")
    assert reset_code(client, 1) == PROTOCOL_ERROR
    serves_on(client, 3)


def test_a_body_that_matches_its_content_length_is_served(client):
    body = grpc_message(identity_request([2.0]))
    client.send(HEADERS, END_HEADERS, 1, client.encoder.encode(REQUEST + [("content-length", str(len(body)))]))
    client.send(DATA, END_STREAM, 1, body)
    assert grpc_status(client.response(1)) == (0, "")


def test_trailers_with_a_pseudo_header_are_a_stream_error(client):
    client.send(HEADERS, END_HEADERS, 1, client.header_block())
    client.send(DATA, 0, 1, grpc_message(identity_request()))
    client.send(HEADERS, END_HEADERS | END_STREAM, 1, client.encoder.encode([(":path", "/")]))
    assert reset_code(client, 1) == PROTOCOL_ERROR
    serves_on(client, 3)


def test_headers_depending_on_their_own_stream_are_a_stream_error(client):
    client.send(HEADERS, END_HEADERS | END_STREAM | PRIORITY_FLAG, 1, b"\x00\x00\x00\x01\x10" + client.header_block())
    assert reset_code(client, 1) == PROTOCOL_ERROR
    serves_on(client, 3)  # the block was decoded: the HPACK state stays in step


def test_priority_depending_on_its_own_stream_is_a_stream_error(client):
    client.send(PRIORITY, 0, 1, b"\x00\x00\x00\x01\x10")
    assert reset_code(client, 1) == PROTOCOL_ERROR
    serves_on(client, 3)


def test_window_update_of_zero_on_an_answered_stream_is_a_stream_error(client):
    serves_on(client, 1)
    client.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0))
    assert reset_code(client, 1) == PROTOCOL_ERROR


def test_a_stream_window_above_2_31_is_a_flow_control_stream_error(client):
    client.send(HEADERS, END_HEADERS, 1, client.header_block())
    client.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 2**31 - 1))
    client.send(WINDOW_UPDATE, 0, 1, struct.pack(">I", 2**31 - 1))
    assert reset_code(client, 1) == FLOW_CONTROL_ERROR


CONNECTION_ERRORS = {
    "PRIORITY on stream 0": (frame(PRIORITY, 0, 0, b"\x00\x00\x00\x01\x10"), PROTOCOL_ERROR),
    "WINDOW_UPDATE on an idle stream": (frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1)), PROTOCOL_ERROR),
    "SETTINGS_ENABLE_PUSH 2": (frame(SETTINGS, 0, 0, struct.pack(">HI", 0x2, 2)), PROTOCOL_ERROR),
    "HEADERS larger than SETTINGS_MAX_FRAME_SIZE": (frame(HEADERS, END_HEADERS, 1, b"\x00" * 16_385), FRAME_SIZE_ERROR),
}


@pytest.mark.parametrize("sent, code", list(CONNECTION_ERRORS.values()), ids=list(CONNECTION_ERRORS))
def test_connection_errors(client, sent, code):
    client.sock.sendall(sent)
    assert goaway_code(client) == code


def test_data_with_padding_longer_than_the_frame_is_a_connection_error_on_any_stream(client):
    """Even on a stream already answered (a POST that is not gRPC gets 415 at once)."""
    client.send(HEADERS, END_HEADERS, 1, client.encoder.encode(without("content-type")))
    client.send(DATA, PADDED | END_STREAM, 1, b"\x06test")
    assert goaway_code(client) == PROTOCOL_ERROR


def test_the_first_frame_after_the_preface_must_be_settings(port):
    client = RawHttp2(port, preface=b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(PING, 0, 0, b"12345678"))
    try:
        assert goaway_code(client) == PROTOCOL_ERROR
    finally:
        client.close()


def test_a_table_size_update_after_a_field_is_a_compression_error(client):
    block = client.header_block() + b"\x20"  # "table size 0", at the end of the block
    client.send(HEADERS, END_HEADERS | END_STREAM, 1, block)
    assert goaway_code(client) == COMPRESSION_ERROR
    with pytest.raises(HeaderCompressionError, match="after a header field"):
        HeaderDecoder().decode(b"\x82\x20")
    assert HeaderDecoder().decode(b"\x20\x3f\xe1\x1f\x82") == [(":method", "GET")]  # at the start: fine


@pytest.mark.parametrize("method, body", [("GET", True), ("HEAD", False)])
def test_a_request_that_is_not_grpc_gets_http_405_with_a_readable_body(client, method, body):
    client.send(HEADERS, END_HEADERS | END_STREAM, 1, client.header_block(path="/", method=method))
    response = client.response(1)
    assert dict(response["headers"][0])[":status"] == "405"
    assert (b"gRPC" in response["body"]) if body else response["body"] == b""


def test_a_post_that_is_not_grpc_is_answered_415_once_its_body_ends(client):
    client.send(HEADERS, END_HEADERS, 1, client.encoder.encode(without("content-type")))
    client.send(DATA, 0, 1, b"some body")
    client.send(DATA, END_STREAM, 1, b"more")
    response = client.response(1)
    assert dict(response["headers"][0])[":status"] == "415" and b"application/grpc" in response["body"]
    assert "reset" not in response
    serves_on(client, 3)


def test_a_unary_call_with_two_messages_is_internal(client):
    """gRPC's cardinality rule (grpc-go: "cardinality violation", grpc-java: "Too many
    requests"): a unary request is one message."""
    message = grpc_message(identity_request([1.0]))
    client.send(HEADERS, END_HEADERS, 1, client.header_block())
    client.send(DATA, END_STREAM, 1, message + message)
    status, text = grpc_status(client.response(1))
    assert status == 13 and "more than one request message" in text
    serves_on(client, 3)
