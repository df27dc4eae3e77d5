"""naiad_wire.http2's sans-IO state machine, driven with bytes alone (no socket, no event
loop): what it yields, what it has to send, and the rules it enforces."""

from __future__ import annotations

import struct
import time

import hpack

from naiad_wire.http2 import (
    PREFACE,
    DataReceived,
    ErrorCode,
    HandshakeDone,
    Http2Limits,
    Http2State,
    PingAcknowledged,
    RequestReceived,
    StreamReset,
)

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/pkg.Service/Method"),
    (":authority", "x"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    found = []
    while data:
        length = int.from_bytes(data[:3], "big")
        found.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, data[9 : 9 + length]))
        data = data[9 + length :]
    return found


class Recorder:
    """A stream's handler that records what it is given."""

    def __init__(self) -> None:
        self.data: list[tuple[bytes, bool]] = []
        self.reset = False

    def data_received(self, data: bytes, end_stream: bool) -> None:
        self.data.append((data, end_stream))

    def stream_reset(self) -> None:
        self.reset = True


class Peer:
    """The client side: feeds bytes to a state, plays the application on its events."""

    def __init__(self, limits: Http2Limits | None = None, settings: bytes = b"") -> None:
        self.outputs = 0
        self.state = Http2State(limits or Http2Limits(), self._output)
        self.encoder = hpack.Encoder()
        self.handlers: dict[int, Recorder] = {}
        self.events: list[object] = []
        self.state.initiate()
        self.server_hello = frames(self.state.data_to_send())
        self.feed(PREFACE + frame(SETTINGS, 0, 0, settings))

    def _output(self) -> None:
        self.outputs += 1

    def feed(self, data: bytes, on_request=None) -> list[tuple[int, int, int, bytes]]:
        for event in self.state.receive(data):
            self.events.append(event)
            if isinstance(event, RequestReceived):
                handler = Recorder()
                self.handlers[event.stream.id] = handler
                event.stream.events = handler
                if on_request is not None:
                    on_request(event.stream)
            elif isinstance(event, DataReceived) and event.stream.events is not None:
                event.stream.events.data_received(event.data, event.end_stream)
            elif isinstance(event, StreamReset):
                event.events.stream_reset()
        return frames(self.state.data_to_send())

    def headers(self, stream_id: int, fields=REQUEST, flags: int = END_HEADERS) -> bytes:
        return frame(HEADERS, flags, stream_id, self.encoder.encode(fields))


def test_the_handshake_is_settings_both_ways():
    peer = Peer(Http2Limits(max_concurrent_streams=7, stream_window=1 << 20))
    (kind, _, _, payload), (update, _, _, increment) = peer.server_hello
    settings = dict(struct.iter_unpack(">HI", payload))
    assert kind == SETTINGS and settings[0x3] == 7 and settings[0x4] == 1 << 20 and settings[0x2] == 0
    assert update == WINDOW_UPDATE and int.from_bytes(increment, "big") == (16 << 20) - 65_535
    assert [type(e) for e in peer.events] == [HandshakeDone]
    assert peer.feed(frame(SETTINGS, 0, 0)) == [(SETTINGS, ACK, 0, b"")]


def test_a_request_in_continuation_and_padding_becomes_events_and_an_answer():
    peer = Peer()
    block = peer.encoder.encode(REQUEST)
    padded = bytes([3]) + block[:10] + b"\x00" * 3
    sent = frame(HEADERS, PADDED, 1, padded) + frame(CONTINUATION, END_HEADERS, 1, block[10:])
    sent += frame(DATA, PADDED | END_STREAM, 1, b"\x02body\x00\x00")
    assert peer.feed(sent) == []
    request, data = peer.events[1:]
    assert isinstance(request, RequestReceived) and request.headers == REQUEST and not request.end_stream
    assert isinstance(data, DataReceived) and peer.handlers[1].data == [(b"body", True)]
    outputs = peer.outputs
    request.stream.respond(b"\x88", b"answer", b"\x40\x01a\x01b")
    assert frames(peer.state.data_to_send()) == [
        (HEADERS, END_HEADERS, 1, b"\x88"),
        (DATA, 0, 1, b"answer"),
        (HEADERS, END_HEADERS | END_STREAM, 1, b"\x40\x01a\x01b"),
    ]
    assert peer.outputs == outputs + 1  # an answer outside `receive` says that bytes wait


def test_the_handler_runs_before_the_next_frame_is_parsed():
    """A stream its handler answered at once is closed for the DATA in the same bytes."""
    peer = Peer()
    sent = peer.headers(1) + frame(DATA, 0, 1, b"late")
    out = peer.feed(sent, on_request=lambda stream: stream.send_headers(b"\x88", end_stream=True))
    assert (HEADERS, END_HEADERS | END_STREAM, 1, b"\x88") in out
    assert (RST_STREAM, 0, 1, struct.pack(">I", ErrorCode.NO_ERROR)) in out  # answered before the body ended
    assert (RST_STREAM, 0, 1, struct.pack(">I", ErrorCode.STREAM_CLOSED)) in out
    assert peer.handlers[1].data == []


def test_sends_wait_for_the_peers_window():
    peer = Peer(settings=struct.pack(">HI", 0x4, 10))  # INITIAL_WINDOW_SIZE 10
    peer.feed(peer.headers(1, flags=END_HEADERS | END_STREAM))
    stream = peer.events[-1].stream
    stream.send_headers(b"\x88")
    stream.send_data(b"x" * 25, end_stream=True)
    assert [f[3] for f in frames(peer.state.data_to_send()) if f[0] == DATA] == [b"x" * 10]
    assert stream.pending and not stream.local_closed
    out = peer.feed(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 100)))
    assert out == [(DATA, END_STREAM, 1, b"x" * 15)] and stream.local_closed


def test_a_large_payload_is_framed_as_views_of_it_not_copies():
    # A connection gathers the pieces into one write: the payload itself is never copied.
    peer = Peer()
    peer.feed(peer.headers(1, flags=END_HEADERS | END_STREAM))
    stream = peer.events[-1].stream
    payload = bytes(range(256)) * 200  # 51,200 bytes: four frames at the default 16 KiB
    stream.send_data(payload, end_stream=True)
    pieces = peer.state.take_output()
    views = [piece for piece in pieces if type(piece) is memoryview]
    assert len(views) == 4 and all(view.obj is payload for view in views)
    sent = frames(b"".join(pieces))
    assert [(kind, flags, sid) for kind, flags, sid, _ in sent] == [(DATA, 0, 1)] * 3 + [(DATA, END_STREAM, 1)]
    assert b"".join(data for *_, data in sent) == payload and peer.state.data_to_send() == b""


def test_pings_are_answered_and_a_flood_gets_goaway():
    peer = Peer(Http2Limits(max_ping_strikes=2))
    assert peer.feed(frame(PING, 0, 0, b"12345678")) == [(PING, ACK, 0, b"12345678")]
    out = []
    for _ in range(3):
        out += peer.feed(frame(PING, 0, 0, b"12345678"))
    goaway = [f for f in out if f[0] == GOAWAY]
    assert goaway and struct.unpack(">II", goaway[0][3][:8])[1] == ErrorCode.ENHANCE_YOUR_CALM
    assert goaway[0][3][8:] == b"too_many_pings" and peer.state.closed
    assert peer.feed(frame(PING, 0, 0, b"12345678")) == []  # closed: input is discarded
    peer = Peer()
    peer.feed(frame(PING, ACK, 0, b"87654321"))
    assert isinstance(peer.events[-1], PingAcknowledged)


def test_streams_past_the_limit_are_refused():
    peer = Peer(Http2Limits(max_concurrent_streams=1))
    assert peer.feed(peer.headers(1)) == []
    out = peer.feed(peer.headers(3))
    assert out == [(RST_STREAM, 0, 3, struct.pack(">I", ErrorCode.REFUSED_STREAM))] and 3 not in peer.handlers


def test_a_peer_reset_is_an_event_for_its_handler():
    peer = Peer()
    peer.feed(peer.headers(1))
    peer.feed(frame(RST_STREAM, 0, 1, struct.pack(">I", ErrorCode.CANCEL)))
    assert isinstance(peer.events[-1], StreamReset) and peer.handlers[1].reset


def test_garbage_is_a_connection_error():
    state = Http2State(Http2Limits())
    state.initiate()
    state.data_to_send()
    assert list(state.receive(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")) == []
    ((kind, _, _, payload),) = frames(state.data_to_send())
    assert kind == GOAWAY and struct.unpack(">II", payload[:8])[1] == ErrorCode.PROTOCOL_ERROR and state.closed


def test_frames_split_anywhere_are_parsed_the_same():
    peer = Peer()
    sent = peer.headers(1) + frame(DATA, END_STREAM, 1, b"y" * 1000)
    for byte in sent:
        peer.feed(bytes([byte]))
    assert b"".join(d for d, _ in peer.handlers[1].data) == b"y" * 1000 and peer.handlers[1].data[-1][1]


def test_data_past_the_stream_window_is_a_flow_control_error():
    peer = Peer(Http2Limits(stream_window=100, max_frame_size=16_384))
    peer.feed(peer.headers(1))
    out = peer.feed(frame(DATA, 0, 1, b"z" * 101))
    assert (RST_STREAM, 0, 1, struct.pack(">I", ErrorCode.FLOW_CONTROL_ERROR)) in out and peer.handlers[1].reset


def goaway_of(out: list[tuple[int, int, int, bytes]]) -> tuple[int, bytes] | None:
    """The error code and debug data of the GOAWAY among `out`, if any."""
    for kind, _, _, payload in out:
        if kind == GOAWAY:
            return struct.unpack(">II", payload[:8])[1], payload[8:]
    return None


def test_streams_opened_and_reset_past_the_bound_close_the_connection():
    """HTTP/2 "rapid reset" (CVE-2023-44487): each stream starts a call and is cancelled at
    once, so MAX_CONCURRENT_STREAMS never fills; past `max_resets`, GOAWAY ENHANCE_YOUR_CALM."""
    peer = Peer(Http2Limits(max_resets=3, reset_window_s=60.0))
    for stream_id in (1, 3, 5):
        out = peer.feed(peer.headers(stream_id) + frame(RST_STREAM, 0, stream_id, struct.pack(">I", ErrorCode.CANCEL)))
        assert goaway_of(out) is None and not peer.state.closed
    out = peer.feed(peer.headers(7) + frame(RST_STREAM, 0, 7, struct.pack(">I", ErrorCode.CANCEL)))
    assert goaway_of(out) == (ErrorCode.ENHANCE_YOUR_CALM, b"too_many_resets") and peer.state.closed
    assert all(handler.reset for handler in peer.handlers.values())  # every call was told


def test_streams_the_peer_makes_the_server_reset_count_too():
    """The variant where the peer breaks a rule on its streams so that the server resets them
    (CVE-2025-8671, "MadeYouReset"): a WINDOW_UPDATE of 0 on an open stream here."""
    peer = Peer(Http2Limits(max_resets=2, reset_window_s=60.0))
    outs = []
    for stream_id in (1, 3, 5):
        outs.append(peer.feed(peer.headers(stream_id) + frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", 0))))
    assert [goaway_of(out) for out in outs[:2]] == [None, None]
    assert goaway_of(outs[2]) == (ErrorCode.ENHANCE_YOUR_CALM, b"too_many_resets") and peer.state.closed


def test_resets_of_answered_streams_and_resets_spread_in_time_are_allowed():
    peer = Peer(Http2Limits(max_resets=2, reset_window_s=0.05))

    def answer(stream) -> None:
        stream.respond(b"\x88", b"", b"\x88")

    for stream_id in range(1, 20, 2):  # answered at once: the reset finds no call to stop
        peer.feed(peer.headers(stream_id, flags=END_HEADERS | END_STREAM), on_request=answer)
        peer.feed(frame(RST_STREAM, 0, stream_id, struct.pack(">I", ErrorCode.CANCEL)))
    assert not peer.state.closed
    for stream_id in range(21, 33, 2):  # two per window
        peer.feed(peer.headers(stream_id) + frame(RST_STREAM, 0, stream_id, struct.pack(">I", ErrorCode.CANCEL)))
        if stream_id % 4 == 3:
            time.sleep(0.1)
    assert not peer.state.closed
    assert goaway_of(peer.feed(peer.headers(33) + frame(RST_STREAM, 0, 33, b"\x00\x00\x00\x08"))) is None


def test_no_bound_when_max_resets_is_zero():
    peer = Peer(Http2Limits(max_resets=0))
    for stream_id in range(1, 1001, 2):
        peer.feed(peer.headers(stream_id) + frame(RST_STREAM, 0, stream_id, struct.pack(">I", ErrorCode.CANCEL)))
    assert not peer.state.closed
