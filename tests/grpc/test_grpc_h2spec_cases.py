"""h2spec's cases (summerwind/h2spec 2.x: the generic, http2 and hpack sections), one row each,
as raw frames over a real socket to `naiad serve`'s gRPC port: CI cannot install h2spec
(`scripts/h2spec.sh` runs it where it is), so these rows keep its cases checked on every run.

Each row names h2spec's case (section/number), what it sends, and what the RFC requires: a
connection error is GOAWAY with the code named and then the connection closes; a stream error
is RST_STREAM with the code named while the connection serves on; a frame to be ignored
leaves the connection answering PING; a request gets its answer. Where the RFC allows either
a stream or a connection error, the row holds naiad's choice.

Covered elsewhere, not repeated here: 8.1.2 (request header fields: every h2spec case of
8.1.2.1 to 8.1.2.6 is a row of `MALFORMED` in test_grpc_http2_rules.py), hpack 4.2/1 (a
table size update after a field, in the same file)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest
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
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    RawHttp2,
    frame,
    goaway_code,
    grpc_message,
    grpc_status,
    identity_request,
    reset_code,
)

NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED = 0x0, 0x1, 0x3, 0x5
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR = 0x6, 0x7, 0x8, 0x9
MAX_STREAMS = 4
SLEEPY_MODEL = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"3000"}}]"""


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("h2spec"), ["identity"])
    (repo / "sleepy" / "1").mkdir(parents=True)
    (repo / "sleepy" / "config.pbtxt").write_text(SLEEPY_MODEL)
    with numpy_server(repo, "--grpc-max-concurrent-streams", str(MAX_STREAMS)) as process:
        yield int(process.grpc_url.rsplit(":", 1)[1])
        assert "Traceback" not in process.log(), process.log()


# -- what a row sends ------------------------------------------------------------------------

Send = Callable[[RawHttp2], None]


def raw(*frames: bytes) -> Send:
    return lambda client: client.sock.sendall(b"".join(frames))


def u32(value: int) -> bytes:
    return struct.pack(">I", value)


def setting(key: int, value: int) -> bytes:
    return struct.pack(">HI", key, value)


def call(stream_id: int, values: list[float] | None = None, model: str = "identity") -> Send:
    """A whole unary call: HEADERS, then its message in DATA with END_STREAM."""
    return lambda client: client.call(stream_id, identity_request(values or [7.0], model))


def opened(stream_id: int) -> Send:
    """HEADERS of a call whose body has not come yet: the stream is open."""
    return lambda client: client.send(HEADERS, END_HEADERS, stream_id, client.header_block())


def half_closed(stream_id: int) -> Send:
    """A whole call to a model that takes seconds: half-closed (remote) meanwhile."""
    return call(stream_id, model="sleepy")


def answered(stream_id: int) -> Send:
    """A call answered and done: the stream is closed."""

    def send(client: RawHttp2) -> None:
        call(stream_id)(client)
        assert grpc_status(client.response(stream_id)) == (0, "")

    return send


def then(*steps: Send) -> Send:
    def send(client: RawHttp2) -> None:
        for step in steps:
            step(client)

    return send


def headers(stream_id: int, flags: int = END_HEADERS | END_STREAM, before: bytes = b"", after: bytes = b"") -> Send:
    """HEADERS of a call with `before` and `after` around its block (padding, priority, a
    broken field)."""
    return lambda client: client.send(HEADERS, flags, stream_id, before + client.header_block() + after)


def split_headers(stream_id: int, *between: bytes, parts: int = 2, last: int = END_HEADERS) -> Send:
    """A call's block in HEADERS and CONTINUATION frames, `between` sent after the HEADERS."""

    def send(client: RawHttp2) -> None:
        whole = client.header_block()
        size = len(whole) // parts + 1
        pieces = [whole[i : i + size] for i in range(0, len(whole), size)]
        client.send(HEADERS, 0, stream_id, pieces[0])
        client.sock.sendall(b"".join(between))
        for number, piece in enumerate(pieces[1:], 2):
            client.send(CONTINUATION, last if number == len(pieces) else 0, stream_id, piece)

    return send


def with_field(field_block: bytes, stream_id: int = 1) -> Send:
    """A call whose header block ends with one more field, encoded by hand."""
    return headers(stream_id, after=field_block)


def request_block(representation: int, huffman: bool = False) -> Callable[[RawHttp2], bytes]:
    """The request's block with its non-static fields in one literal representation (RFC 7541
    6.2): 0x40 with incremental indexing, 0x00 without indexing, 0x10 never indexed; names
    by index where the static table has them."""
    import hpack

    def build(client: RawHttp2) -> bytes:
        if huffman:  # hpack's encoder writes Huffman strings, incremental or never indexed
            fields = [
                hpack.NeverIndexedHeaderTuple(*f) if representation == 0x10 else f
                for f in (
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":path", INFER),
                    (":authority", "localhost"),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                )
            ]
            return hpack.Encoder().encode(fields, huffman=True)
        prefix_bits = 6 if representation == 0x40 else 4

        def literal(name_index: int, name: str, value: str) -> bytes:
            mask = (1 << prefix_bits) - 1
            if name_index < mask:  # RFC 7541 5.1: the index in the prefix, or the rest after it
                head = bytes([representation | name_index])
            else:
                assert name_index - mask < 0x80, "one continuation byte is all these need"
                head = bytes([representation | mask, name_index - mask])
            named = b"" if name_index else bytes([len(name)]) + name.encode()
            return head + named + bytes([len(value)]) + value.encode()

        return (
            b"\x83\x86"  # :method POST, :scheme http (indexed)
            + literal(4, "", INFER)  # :path
            + literal(1, "", "localhost")  # :authority
            + literal(31, "", "application/grpc")  # content-type
            + literal(0, "te", "trailers")  # a new name
        )

    return build


def hpack_call(representation: int, huffman: bool = False) -> Send:
    def send(client: RawHttp2) -> None:
        client.send(HEADERS, END_HEADERS, 1, request_block(representation, huffman)(client))
        client.send_body(1, grpc_message(identity_request([1.0])))

    return send


# -- what a row expects ----------------------------------------------------------------------

Check = Callable[[RawHttp2], None]


def goaway(code: int) -> Check:
    def check(client: RawHttp2) -> None:
        assert goaway_code(client) == code

    return check


def alive(client: RawHttp2) -> None:
    """The connection answers a PING, with no stream reset and no GOAWAY before."""
    client.send(PING, 0, 0, b"h2spec!!")
    while True:
        got = client.read_frame()
        assert got is not None, "the connection closed"
        kind, flags, stream_id, payload = got
        assert kind not in (GOAWAY, RST_STREAM), f"frame {kind} on stream {stream_id}: {payload!r}"
        if kind == PING and flags & ACK and payload == b"h2spec!!":
            return


def reset(stream_id: int, code: int) -> Check:
    def check(client: RawHttp2) -> None:
        assert reset_code(client, stream_id) == code
        alive(client)

    return check


def served(stream_id: int) -> Check:
    def check(client: RawHttp2) -> None:
        response = client.response(stream_id)
        assert "reset" not in response, f"stream {stream_id} was reset: {response['reset']}"
        assert response["headers"], "no answer"
        alive(client)

    return check


def first_data(stream_id: int, size: int, then_send: Send | None = None, then_size: int | None = None) -> Check:
    """The first DATA frame of `stream_id` carries `size` bytes (the peer's window); with
    `then_send`, the next one after it `then_size`."""

    def next_data(client: RawHttp2) -> bytes:
        while True:
            got = client.read_frame()
            assert got is not None, "the connection closed"
            kind, _, sid, payload = got
            assert kind not in (GOAWAY, RST_STREAM), f"frame {kind}: {payload!r}"
            if kind == DATA and sid == stream_id:
                return payload

    def check(client: RawHttp2) -> None:
        assert len(next_data(client)) == size
        if then_send is not None:
            then_send(client)
            assert len(next_data(client)) == then_size

    return check


def settings_acknowledged(count: int) -> Check:
    """`count` SETTINGS ACKs arrive (the handshake's and the row's)."""

    def check(client: RawHttp2) -> None:
        acks = 0
        while acks < count:
            got = client.read_frame()
            assert got is not None and got[0] != GOAWAY, f"no SETTINGS ACK: {got!r}"
            acks += got[0] == SETTINGS and bool(got[1] & ACK)
        alive(client)

    return check


def ping_answered(client: RawHttp2, payload: bytes = b"answer!!") -> None:
    client.send(PING, 0, 0, payload)
    acknowledged(payload)(client)


def acknowledged(payload: bytes) -> Check:
    """The next PING the server sends is the ACK of the PING of `payload`."""

    def check(client: RawHttp2) -> None:
        got = client.wait_for(PING)
        assert got is not None and got[1] & ACK and got[3] == payload

    return check


def ping_ack_ignored(client: RawHttp2) -> None:
    """A PING ACK gets no answer: the next PING frame read is the answer to a later PING."""
    client.send(PING, ACK, 0, b"ignored!")
    client.send(PING, 0, 0, b"answered")
    got = client.wait_for(PING)
    assert got is not None and got[3] == b"answered"


@dataclass(frozen=True)
class Case:
    id: str  # h2spec's section/number
    says: str
    send: Send
    check: Check
    preface: bytes = PREFACE


HUFFMAN_EOS = b"\x00\x01a\x84\xff\xff\xff\xff"  # a value of 32 ones: EOS inside the string
HUFFMAN_LONG_PADDING = b"\x00\x01a\x82\x1f\xff"  # "a" and then eleven bits of padding
HUFFMAN_ZERO_PADDING = b"\x00\x01a\x81\x18"  # "a" and then padding of zeros

CASES = [
    # generic: that the server works at all, frame by frame
    Case("generic/1/1", "client connection preface", raw(), alive),
    Case("generic/2/1", "PRIORITY on an idle stream", raw(frame(PRIORITY, 0, 1, u32(0) + b"\x10")), alive),
    Case(
        "generic/2/2",
        "WINDOW_UPDATE on a half-closed (remote) stream",
        then(half_closed(1), raw(frame(WINDOW_UPDATE, 0, 1, u32(1)))),
        alive,
    ),
    Case(
        "generic/2/3",
        "PRIORITY on a half-closed (remote) stream",
        then(half_closed(1), raw(frame(PRIORITY, 0, 1, u32(0) + b"\x10"))),
        alive,
    ),
    Case(
        "generic/2/4",
        "RST_STREAM on a half-closed (remote) stream",
        then(half_closed(1), raw(frame(RST_STREAM, 0, 1, u32(CANCEL)))),
        alive,
    ),
    Case(
        "generic/2/5",
        "PRIORITY on a closed stream",
        then(answered(1), raw(frame(PRIORITY, 0, 1, u32(0) + b"\x10"))),
        alive,
    ),
    Case("generic/3.1/1", "DATA", call(1), served(1)),
    Case(
        "generic/3.1/2",
        "DATA in several frames",
        lambda client: (
            client.send(HEADERS, END_HEADERS, 1, client.header_block()),
            client.send(DATA, 0, 1, grpc_message(identity_request())[:4]),
            client.send(DATA, END_STREAM, 1, grpc_message(identity_request())[4:]),
        ),
        served(1),
    ),
    Case(
        "generic/3.1/3",
        "DATA with padding",
        lambda client: (
            client.send(HEADERS, END_HEADERS, 1, client.header_block()),
            client.send(DATA, END_STREAM | PADDED, 1, b"\x04" + grpc_message(identity_request()) + b"\x00" * 4),
        ),
        served(1),
    ),
    Case("generic/3.2/1", "HEADERS", then(opened(1), raw(frame(DATA, END_STREAM, 1, b""))), served(1)),
    Case(
        "generic/3.2/2",
        "HEADERS with padding",
        headers(1, END_HEADERS | END_STREAM | PADDED, b"\x03", b"\x00" * 3),
        served(1),
    ),
    Case(
        "generic/3.2/3",
        "HEADERS with priority",
        headers(1, END_HEADERS | END_STREAM | PRIORITY_FLAG, u32(0) + b"\x10"),
        served(1),
    ),
    Case("generic/3.3/1", "PRIORITY of weight 256", raw(frame(PRIORITY, 0, 1, u32(0) + b"\xff")), alive),
    Case(
        "generic/3.3/2",
        "PRIORITY with an exclusive dependency",
        raw(frame(PRIORITY, 0, 1, u32(0x80000000) + b"\x10")),
        alive,
    ),
    Case("generic/3.4/1", "RST_STREAM", then(opened(1), raw(frame(RST_STREAM, 0, 1, u32(CANCEL)))), alive),
    *[
        Case(
            f"generic/3.5/{key}",
            f"SETTINGS parameter {key}",
            raw(frame(SETTINGS, 0, 0, setting(key, value))),
            settings_acknowledged(2),
        )
        for key, value in ((1, 4096), (2, 0), (3, 100), (4, 65_535), (5, 16_384), (6, 65_535))
    ],
    Case("generic/3.7/1", "PING", raw(), ping_answered),
    Case("generic/3.8/1", "GOAWAY", raw(frame(GOAWAY, 0, 0, u32(0) + u32(NO_ERROR))), alive),
    Case("generic/3.9/1", "WINDOW_UPDATE on the connection", raw(frame(WINDOW_UPDATE, 0, 0, u32(1))), alive),
    Case("generic/3.9/2", "WINDOW_UPDATE on a stream", then(opened(1), raw(frame(WINDOW_UPDATE, 0, 1, u32(1)))), alive),
    Case("generic/3.10/1", "CONTINUATION", then(split_headers(1), raw(frame(DATA, END_STREAM, 1))), served(1)),
    Case(
        "generic/3.10/2",
        "several CONTINUATIONs",
        then(split_headers(1, parts=4), raw(frame(DATA, END_STREAM, 1))),
        served(1),
    ),
    Case(
        "generic/4/1",
        "GET",
        lambda c: c.send(HEADERS, END_HEADERS | END_STREAM, 1, c.header_block("/", method="GET")),
        served(1),
    ),
    Case(
        "generic/4/2",
        "HEAD",
        lambda c: c.send(HEADERS, END_HEADERS | END_STREAM, 1, c.header_block("/", method="HEAD")),
        served(1),
    ),
    Case("generic/4/3", "POST", call(1), served(1)),
    Case(
        "generic/4/4",
        "POST with trailers",
        lambda client: (
            client.send(HEADERS, END_HEADERS, 1, client.header_block()),
            client.send(DATA, 0, 1, grpc_message(identity_request())),
            client.send(HEADERS, END_HEADERS | END_STREAM, 1, client.encoder.encode([("x-trailer", "1")])),
        ),
        served(1),
    ),
    Case("generic/5/1", "literal fields with incremental indexing", hpack_call(0x40), served(1)),
    Case("generic/5/2", "literal fields without indexing", hpack_call(0x00), served(1)),
    Case("generic/5/3", "literal fields never indexed", hpack_call(0x10), served(1)),
    Case("generic/5/4", "Huffman literals with incremental indexing", hpack_call(0x40, huffman=True), served(1)),
    Case("generic/5/5", "Huffman literals never indexed", hpack_call(0x10, huffman=True), served(1)),
    Case(
        "generic/5/6",
        "a dynamic table size update at the start of a block",
        lambda client: client.send(HEADERS, END_HEADERS | END_STREAM, 1, b"\x3f\x81\x1f" + client.header_block()),
        served(1),
    ),
    # http2/3.5: the preface
    Case(
        "http2/3.5/2",
        "an invalid connection preface",
        raw(),
        goaway(PROTOCOL_ERROR),
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\r",
    ),
    # http2/4.1: frame format
    Case("http2/4.1/1", "a frame of unknown type", raw(frame(0x16, 0, 0, b"12345678")), alive),
    Case("http2/4.1/2", "undefined flags on PING", raw(frame(PING, 0x16, 0, b"12345678")), acknowledged(b"12345678")),
    Case(
        "http2/4.1/3", "the reserved bit set", raw(frame(PING, 0, 0x80000000, b"12345678")), acknowledged(b"12345678")
    ),
    # http2/4.2: frame size
    Case(
        "http2/4.2/1",
        "DATA of 2^14 octets",
        then(opened(1), raw(frame(DATA, END_STREAM, 1, b"\x00" * 16_384))),
        served(1),
    ),
    Case(
        "http2/4.2/2",
        "DATA over SETTINGS_MAX_FRAME_SIZE",
        then(opened(1), raw(frame(DATA, 0, 1, b"\x00" * 16_385))),
        goaway(FRAME_SIZE_ERROR),
    ),
    Case(
        "http2/4.2/3",
        "HEADERS over SETTINGS_MAX_FRAME_SIZE",
        headers(1, after=b"\x00" * 16_385),
        goaway(FRAME_SIZE_ERROR),
    ),
    # http2/4.3: header compression
    Case(
        "http2/4.3/1",
        "an invalid header block",
        raw(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xff\xff\xff\xff")),
        goaway(COMPRESSION_ERROR),
    ),
    Case(
        "http2/4.3/2",
        "PRIORITY amid a header block",
        split_headers(1, frame(PRIORITY, 0, 1, u32(0) + b"\x10")),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/4.3/3",
        "HEADERS of another stream amid a header block",
        lambda c: split_headers(1, frame(HEADERS, END_HEADERS, 3, c.header_block()))(c),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/5.1: stream states
    Case("http2/5.1/1", "idle: DATA", raw(frame(DATA, END_STREAM, 1, b"x")), goaway(PROTOCOL_ERROR)),
    Case("http2/5.1/2", "idle: RST_STREAM", raw(frame(RST_STREAM, 0, 1, u32(CANCEL))), goaway(PROTOCOL_ERROR)),
    Case("http2/5.1/3", "idle: WINDOW_UPDATE", raw(frame(WINDOW_UPDATE, 0, 1, u32(1))), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/5.1/4", "idle: CONTINUATION", raw(frame(CONTINUATION, END_HEADERS, 1, b"\x82")), goaway(PROTOCOL_ERROR)
    ),
    Case(
        "http2/5.1/5",
        "half-closed (remote): DATA",
        then(half_closed(1), raw(frame(DATA, 0, 1, b"x"))),
        reset(1, STREAM_CLOSED),
    ),
    Case("http2/5.1/6", "half-closed (remote): HEADERS", then(half_closed(1), headers(1)), reset(1, STREAM_CLOSED)),
    Case(
        "http2/5.1/7",
        "half-closed (remote): CONTINUATION",
        then(half_closed(1), raw(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/5.1/8",
        "closed: DATA after RST_STREAM",
        then(opened(1), raw(frame(RST_STREAM, 0, 1, u32(CANCEL)), frame(DATA, 0, 1, b"x"))),
        reset(1, STREAM_CLOSED),
    ),
    Case(
        "http2/5.1/9",
        "closed: HEADERS after RST_STREAM",
        then(opened(1), raw(frame(RST_STREAM, 0, 1, u32(CANCEL))), headers(1)),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/5.1/10",
        "closed: CONTINUATION after RST_STREAM",
        then(opened(1), raw(frame(RST_STREAM, 0, 1, u32(CANCEL)), frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/5.1/11",
        "closed: DATA after END_STREAM",
        then(answered(1), raw(frame(DATA, 0, 1, b"x"))),
        reset(1, STREAM_CLOSED),
    ),
    Case("http2/5.1/12", "closed: HEADERS after END_STREAM", then(answered(1), headers(1)), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/5.1/13",
        "closed: CONTINUATION after END_STREAM",
        then(answered(1), raw(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case("http2/5.1.1/1", "an even stream identifier", headers(2), goaway(PROTOCOL_ERROR)),
    Case("http2/5.1.1/2", "a stream identifier below the last", then(opened(5), headers(3)), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/5.1.2/1",
        "more streams than SETTINGS_MAX_CONCURRENT_STREAMS",
        then(*[opened(1 + 2 * n) for n in range(MAX_STREAMS + 1)]),
        reset(1 + 2 * MAX_STREAMS, REFUSED_STREAM),
    ),
    # http2/5.3: priority
    Case(
        "http2/5.3.1/1",
        "HEADERS depending on its own stream",
        headers(1, END_HEADERS | END_STREAM | PRIORITY_FLAG, u32(1) + b"\x10"),
        reset(1, PROTOCOL_ERROR),
    ),
    Case(
        "http2/5.3.1/2",
        "PRIORITY depending on its own stream",
        raw(frame(PRIORITY, 0, 1, u32(1) + b"\x10")),
        reset(1, PROTOCOL_ERROR),
    ),
    # http2/5.4: error handling
    Case("http2/5.4.1/1", "an invalid PING: GOAWAY", raw(frame(PING, 0, 0, b"123")), goaway(FRAME_SIZE_ERROR)),
    Case(
        "http2/5.4.1/2",
        "an invalid PING: the connection closes",
        raw(frame(PING, 0, 1, b"12345678")),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/5.5: extensions
    Case("http2/5.5/1", "an unknown extension frame", raw(frame(0xFF, 0, 0, b"ext")), alive),
    Case(
        "http2/5.5/2",
        "an unknown extension frame amid a header block",
        split_headers(1, frame(0xFF, 0, 1, b"ext")),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/6.1: DATA
    Case("http2/6.1/1", "DATA on stream 0", raw(frame(DATA, 0, 0, b"x")), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.1/2",
        "DATA on a half-closed (remote) stream",
        then(half_closed(1), raw(frame(DATA, END_STREAM, 1, b"x"))),
        reset(1, STREAM_CLOSED),
    ),
    Case(
        "http2/6.1/3",
        "DATA with a pad length past the frame",
        then(opened(1), raw(frame(DATA, PADDED, 1, b"\x06test"))),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/6.2: HEADERS
    Case(
        "http2/6.2/1",
        "HEADERS without END_HEADERS, then PRIORITY",
        split_headers(1, frame(PRIORITY, 0, 3, u32(0) + b"\x10")),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.2/2",
        "HEADERS to another stream amid a header block",
        lambda c: split_headers(1, frame(HEADERS, END_HEADERS | END_STREAM, 3, c.header_block()))(c),
        goaway(PROTOCOL_ERROR),
    ),
    Case("http2/6.2/3", "HEADERS on stream 0", headers(0), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.2/4",
        "HEADERS with a pad length past the frame",
        headers(1, END_HEADERS | END_STREAM | PADDED, b"\xff"),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/6.3: PRIORITY
    Case("http2/6.3/1", "PRIORITY on stream 0", raw(frame(PRIORITY, 0, 0, u32(1) + b"\x10")), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.3/2",
        "PRIORITY of 4 octets",
        then(opened(1), raw(frame(PRIORITY, 0, 1, u32(0)))),
        reset(1, FRAME_SIZE_ERROR),
    ),
    # http2/6.4: RST_STREAM
    Case("http2/6.4/1", "RST_STREAM on stream 0", raw(frame(RST_STREAM, 0, 0, u32(CANCEL))), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.4/2", "RST_STREAM on an idle stream", raw(frame(RST_STREAM, 0, 3, u32(CANCEL))), goaway(PROTOCOL_ERROR)
    ),
    Case(
        "http2/6.4/3",
        "RST_STREAM of 3 octets",
        then(opened(1), raw(frame(RST_STREAM, 0, 1, b"\x00\x00\x08"))),
        goaway(FRAME_SIZE_ERROR),
    ),
    # http2/6.5: SETTINGS
    Case("http2/6.5/1", "SETTINGS ACK with a payload", raw(frame(SETTINGS, ACK, 0, b"\x00")), goaway(FRAME_SIZE_ERROR)),
    Case("http2/6.5/2", "SETTINGS on a stream", raw(frame(SETTINGS, 0, 1, setting(3, 100))), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.5/3",
        "SETTINGS of a length not a multiple of 6",
        raw(frame(SETTINGS, 0, 0, b"\x00\x03\x00\x00")),
        goaway(FRAME_SIZE_ERROR),
    ),
    Case("http2/6.5.2/1", "SETTINGS_ENABLE_PUSH 2", raw(frame(SETTINGS, 0, 0, setting(2, 2))), goaway(PROTOCOL_ERROR)),
    Case(
        "http2/6.5.2/2",
        "SETTINGS_INITIAL_WINDOW_SIZE 2^31",
        raw(frame(SETTINGS, 0, 0, setting(4, 2**31))),
        goaway(FLOW_CONTROL_ERROR),
    ),
    Case(
        "http2/6.5.2/3",
        "SETTINGS_MAX_FRAME_SIZE below 2^14",
        raw(frame(SETTINGS, 0, 0, setting(5, 16_383))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.5.2/4",
        "SETTINGS_MAX_FRAME_SIZE above 2^24-1",
        raw(frame(SETTINGS, 0, 0, setting(5, 2**24))),
        goaway(PROTOCOL_ERROR),
    ),
    Case("http2/6.5.2/5", "an unknown setting", raw(frame(SETTINGS, 0, 0, setting(0xFF, 1))), settings_acknowledged(2)),
    Case(
        "http2/6.5.3/1",
        "SETTINGS_INITIAL_WINDOW_SIZE twice in one frame: the last counts",
        then(raw(frame(SETTINGS, 0, 0, setting(4, 100) + setting(4, 1))), call(1)),
        first_data(1, 1),
    ),
    Case("http2/6.5.3/2", "SETTINGS are acknowledged", raw(frame(SETTINGS, 0, 0)), settings_acknowledged(2)),
    # http2/6.7: PING
    Case("http2/6.7/1", "PING is answered with its payload", raw(), ping_answered),
    Case("http2/6.7/2", "PING ACK is not answered", raw(), ping_ack_ignored),
    Case("http2/6.7/3", "PING on a stream", raw(frame(PING, 0, 1, b"12345678")), goaway(PROTOCOL_ERROR)),
    Case("http2/6.7/4", "PING of 6 octets", raw(frame(PING, 0, 0, b"123456")), goaway(FRAME_SIZE_ERROR)),
    # http2/6.8: GOAWAY
    Case("http2/6.8/1", "GOAWAY on a stream", raw(frame(GOAWAY, 0, 1, u32(0) + u32(NO_ERROR))), goaway(PROTOCOL_ERROR)),
    # http2/6.9: WINDOW_UPDATE and flow control
    Case(
        "http2/6.9/1",
        "WINDOW_UPDATE of 0 on the connection",
        raw(frame(WINDOW_UPDATE, 0, 0, u32(0))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.9/2",
        "WINDOW_UPDATE of 0 on a stream",
        then(opened(1), raw(frame(WINDOW_UPDATE, 0, 1, u32(0)))),
        reset(1, PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.9/3",
        "WINDOW_UPDATE of 3 octets",
        raw(frame(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01")),
        goaway(FRAME_SIZE_ERROR),
    ),
    Case(
        "http2/6.9.1/1",
        "SETTINGS_INITIAL_WINDOW_SIZE 1: DATA of 1 octet",
        then(raw(frame(SETTINGS, 0, 0, setting(4, 1))), call(1)),
        first_data(1, 1),
    ),
    Case(
        "http2/6.9.1/2",
        "a connection window past 2^31-1",
        raw(frame(WINDOW_UPDATE, 0, 0, u32(2**31 - 1)), frame(WINDOW_UPDATE, 0, 0, u32(2**31 - 1))),
        goaway(FLOW_CONTROL_ERROR),
    ),
    Case(
        "http2/6.9.1/3",
        "a stream window past 2^31-1",
        then(opened(1), raw(frame(WINDOW_UPDATE, 0, 1, u32(2**31 - 1)), frame(WINDOW_UPDATE, 0, 1, u32(2**31 - 1)))),
        reset(1, FLOW_CONTROL_ERROR),
    ),
    Case(
        "http2/6.9.2/1",
        "SETTINGS_INITIAL_WINDOW_SIZE changed while a stream is open",
        then(
            opened(1),
            raw(frame(SETTINGS, 0, 0, setting(4, 1))),
            lambda c: c.send_body(1, grpc_message(identity_request())),
        ),
        first_data(1, 1),
    ),
    Case(
        "http2/6.9.2/2",
        "a window made negative by SETTINGS, then reopened",
        then(raw(frame(SETTINGS, 0, 0, setting(4, 3))), call(1)),
        first_data(1, 3, raw(frame(SETTINGS, 0, 0, setting(4, 2)), frame(WINDOW_UPDATE, 0, 1, u32(2))), 1),
    ),
    Case(
        "http2/6.9.2/3",
        "SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1",
        raw(frame(SETTINGS, 0, 0, setting(4, 2**31))),
        goaway(FLOW_CONTROL_ERROR),
    ),
    # http2/6.10: CONTINUATION
    Case(
        "http2/6.10/1",
        "several CONTINUATIONs after HEADERS",
        then(split_headers(1, parts=3), raw(frame(DATA, END_STREAM, 1))),
        served(1),
    ),
    Case(
        "http2/6.10/2",
        "CONTINUATION, then not CONTINUATION",
        then(split_headers(1, parts=3, last=0), raw(frame(DATA, 0, 1, b"x"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.10/3",
        "CONTINUATION on stream 0",
        lambda c: c.sock.sendall(frame(HEADERS, 0, 1, c.header_block()) + frame(CONTINUATION, END_HEADERS, 0, b"")),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.10/4",
        "CONTINUATION after HEADERS with END_HEADERS",
        then(opened(1), raw(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.10/5",
        "CONTINUATION after CONTINUATION with END_HEADERS",
        then(split_headers(1), raw(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    Case(
        "http2/6.10/6",
        "CONTINUATION after DATA",
        then(opened(1), raw(frame(DATA, 0, 1, b"x"), frame(CONTINUATION, END_HEADERS, 1, b"\x82"))),
        goaway(PROTOCOL_ERROR),
    ),
    # http2/7: error codes
    Case("http2/7/1", "GOAWAY with an unknown error code", raw(frame(GOAWAY, 0, 0, u32(0) + u32(0xFF))), alive),
    Case(
        "http2/7/2",
        "RST_STREAM with an unknown error code",
        then(opened(1), raw(frame(RST_STREAM, 0, 1, u32(0xFF)))),
        alive,
    ),
    # http2/8.1: messages
    Case(
        "http2/8.1/1",
        "a second HEADERS without END_STREAM",
        lambda client: (
            client.send(HEADERS, END_HEADERS, 1, client.header_block()),
            client.send(DATA, 0, 1, grpc_message(identity_request())),
            client.send(HEADERS, END_HEADERS, 1, client.encoder.encode([("x-trailer", "1")])),
        ),
        reset(1, PROTOCOL_ERROR),
    ),
    # http2/8.2: server push
    Case(
        "http2/8.2/1",
        "PUSH_PROMISE from a client",
        raw(frame(PUSH_PROMISE, END_HEADERS, 1, u32(2) + b"\x82")),
        goaway(PROTOCOL_ERROR),
    ),
    # hpack
    Case(
        "hpack/2.3.3/1",
        "an indexed field past the tables",
        raw(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xc6")),
        goaway(COMPRESSION_ERROR),
    ),
    Case(
        "hpack/2.3.3/2",
        "a literal whose name index is past the tables",
        raw(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x7f\x07\x01a")),
        goaway(COMPRESSION_ERROR),
    ),
    Case("hpack/5.2/1", "a Huffman string holding EOS", with_field(HUFFMAN_EOS), goaway(COMPRESSION_ERROR)),
    Case(
        "hpack/5.2/2", "Huffman padding longer than 7 bits", with_field(HUFFMAN_LONG_PADDING), goaway(COMPRESSION_ERROR)
    ),
    Case(
        "hpack/5.2/3",
        "Huffman padding that is not EOS's first bits",
        with_field(HUFFMAN_ZERO_PADDING),
        goaway(COMPRESSION_ERROR),
    ),
    Case(
        "hpack/6.1/1",
        "the indexed field 0",
        raw(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x80")),
        goaway(COMPRESSION_ERROR),
    ),
    Case(
        "hpack/6.3/1",
        "a table size update past SETTINGS_HEADER_TABLE_SIZE",
        raw(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x3f\xe2\x1f")),
        goaway(COMPRESSION_ERROR),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{case.id} {case.says}" for case in CASES])
def test_h2spec_case(port, case):
    client = RawHttp2(port, preface=case.preface)
    try:
        case.send(client)
        case.check(client)
    finally:
        client.close()


def test_the_table_names_each_case_once():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
