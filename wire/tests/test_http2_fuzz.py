"""A bounded, deterministic fuzz of what an HTTP/2 peer can send: `Http2State.receive` fed
frames hypothesis builds (valid ones, broken ones, garbage, cut at any byte) while a playing
application answers, resets and acknowledges streams; and HPACK's `HeaderDecoder` fed blocks
of the `hpack` package's encoder (a differential test: an implementation not ours), the same
blocks mutated, and random bytes.

What must hold, whatever arrives: `receive` raises nothing; what the connection sends is
whole frames no larger than the peer allows; open streams stay within
MAX_CONCURRENT_STREAMS; at most one partial frame waits in the input buffer; a request stream
is announced once, with an odd id; a connection error is GOAWAY and then silence; HPACK
raises only HeaderCompressionError and agrees with `hpack` wherever both decode.

Derandomized, as tests/security/test_fuzz.py: the same cases on every run (a few seconds).
NAIAD_FUZZ_SCALE=N runs N times as many; NAIAD_FUZZ_SEED=S draws others."""

from __future__ import annotations

import functools
import os
import random
import struct
from dataclasses import dataclass, field

import hpack
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from naiad_wire.header_compression import HeaderCompressionError, HeaderDecoder
from naiad_wire.http2 import (
    PREFACE,
    DataReceived,
    ErrorCode,
    Http2Limits,
    Http2State,
    RequestReceived,
    Stream,
    StreamReset,
)

SCALE = float(os.environ.get("NAIAD_FUZZ_SCALE", "1"))
SEED = os.environ.get("NAIAD_FUZZ_SEED")
GOAWAY, SETTINGS = 7, 4
MAX_STREAMS = 3  # small, so the fuzz reaches the limit
LIMITS = Http2Limits(max_concurrent_streams=MAX_STREAMS, stream_window=1000, max_header_list_size=4096, max_resets=5)
REQUEST = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/pkg.Service/Method"),
    (":authority", "x"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
]
NAMES = [":path", ":method", "content-type", "te", "grpc-timeout", "x-tenant", "user-agent", "authorization"]


def fuzz_settings(examples: int):
    """hypothesis settings for `examples` cases (times NAIAD_FUZZ_SCALE), the same on every
    run unless NAIAD_FUZZ_SEED asks for others."""

    def apply(test):
        test = settings(
            max_examples=max(1, int(examples * SCALE)),
            derandomize=SEED is None,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(test)
        return seed(int(SEED))(test) if SEED is not None else test

    return apply


def frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def parse_frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """`data` as whole frames; fails the test on a partial one."""
    found = []
    position = 0
    while position < len(data):
        assert len(data) - position >= 9, f"a partial frame header was sent: {data[position:]!r}"
        length = int.from_bytes(data[position : position + 3], "big")
        end = position + 9 + length
        assert end <= len(data), "a frame shorter than its length field was sent"
        kind, flags = data[position + 3], data[position + 4]
        found.append((kind, flags, int.from_bytes(data[position + 5 : position + 9], "big"), data[position + 9 : end]))
        position = end
    return found


# -- what a peer sends --------------------------------------------------------------------

stream_ids = st.one_of(st.sampled_from([0, 1, 3, 5, 7, 2, 0x80000001]), st.integers(0, 2**32 - 1))
header_fields = st.lists(
    st.tuples(st.sampled_from(NAMES + ["x-" + "a" * 40]), st.text("abcXYZ019-_/: \x7f\u00e9", max_size=40)),
    max_size=6,
)


@functools.cache
def header_blocks() -> list[bytes]:
    """Blocks of hpack's encoder, each on a fresh table: requests, valid or not (extra fields,
    uppercase names, Huffman or not). Made once: drawing one is a single choice, where drawing
    its fields would be dozens (hypothesis' own cost is most of this fuzz's time)."""
    rng = random.Random(35)
    blocks = []
    for number in range(64):
        extra = [
            (
                rng.choice(NAMES + ["X-Upper", "connection", ":status"]),
                "".join(rng.choices("abc019-_/ \xe9", k=rng.choice([0, 5, 40]))),
            )
            for _ in range(rng.randint(0, 3))
        ]
        fields = REQUEST + extra if number % 4 else extra
        blocks.append(hpack.Encoder().encode(fields, huffman=number % 2 == 0))
    return blocks


# Strategies are built once, here: one built inside a draw is analysed again on every draw,
# which cost more than the fuzz itself.
BYTES = st.binary(max_size=80)
SHORT_BYTES = st.binary(max_size=40)
EIGHT_OR_MORE = st.binary(min_size=8, max_size=16)
BLOCKS = st.integers(0, 63).map(lambda index: header_blocks()[index])
SETTING_PAIRS = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 2**32 - 1)), max_size=4)
U32_VALUES = st.sampled_from([0, 1, 100, 2**31 - 1, 2**32 - 1])
KINDS = st.one_of(st.integers(0, 9), st.integers(10, 255))
FLAGS = st.one_of(st.sampled_from([0, 1, 4, 5, 8, 0x20, 0x25, 0x2D]), st.integers(0, 255))
SMALL = st.integers(0, 20)
BYTE = st.integers(0, 255)
ACTIONS = st.lists(st.sampled_from(["nothing", "respond", "reset", "acknowledge", "headers"]), max_size=10)
CUTS = st.lists(st.integers(0, 1000), max_size=5)


@st.composite
def frames(draw) -> bytes:
    """One frame, its payload shaped for its type often enough to pass the first checks."""
    kind = draw(KINDS)
    flags = draw(FLAGS)
    choice = draw(SMALL) % 5
    if choice == 0:
        payload = draw(BYTES)
    elif kind in (1, 9) or choice == 1:  # HEADERS, CONTINUATION: a real block, maybe cut
        payload = draw(BLOCKS)
        if kind == 1 and draw(SMALL) < 5:
            payload = payload[: draw(BYTE) % (len(payload) + 1)]
    elif kind == 4:  # SETTINGS: (key, value) pairs
        payload = b"".join(struct.pack(">HI", k, v) for k, v in draw(SETTING_PAIRS))
    elif kind in (3, 8):  # RST_STREAM, WINDOW_UPDATE: 32 bits
        payload = struct.pack(">I", draw(U32_VALUES))
    elif kind in (6, 7):  # PING 8 bytes, GOAWAY 8 and debug data
        payload = draw(EIGHT_OR_MORE)
    else:
        payload = draw(SHORT_BYTES)
    if flags & 0x8 and draw(SMALL) < 10:  # PADDED: a pad length that fits, or not
        payload = bytes([draw(BYTE)]) + payload
    data = frame(kind, flags, draw(stream_ids), payload)
    if draw(SMALL) == 0:  # a length field that lies
        data = bytes([draw(BYTE), draw(BYTE), draw(BYTE)]) + data[3:]
    return data


FRAME_LISTS = st.lists(frames(), max_size=10)
NO_PREFACE = st.binary(max_size=30)


@st.composite
def connections(draw) -> tuple[list[bytes], list[str]]:
    """The byte chunks a peer sends, and what the application does on each event."""
    if draw(SMALL) == 0:
        start = draw(NO_PREFACE)
    else:
        start = PREFACE + frame(SETTINGS, 0, 0, b"")
    sent = start + b"".join(draw(FRAME_LISTS))
    cuts = sorted(len(sent) * cut // 1000 for cut in draw(CUTS))
    chunks = [sent[a:b] for a, b in zip([0, *cuts], [*cuts, len(sent)])]
    return chunks, draw(ACTIONS)


@dataclass
class Handler:
    """A stream's application: records what it gets."""

    data: list[tuple[bytes, bool]] = field(default_factory=list)
    reset: bool = False

    def data_received(self, data: bytes, end_stream: bool) -> None:
        self.data.append((data, end_stream))

    def stream_reset(self) -> None:
        self.reset = True


def act(stream: Stream, action: str) -> None:
    if action == "respond":
        stream.respond(b"\x88", b"answer" * 50, b"\x40\x01a\x01b")
    elif action == "reset":
        stream.reset()
    elif action == "acknowledge":
        stream.acknowledge(100)
    elif action == "headers":
        stream.send_headers(b"\x88")


@fuzz_settings(2000)
@given(connections())
def test_receive_keeps_its_promises_whatever_the_peer_sends(connection):
    chunks, actions = connection
    state = Http2State(LIMITS)
    state.initiate()
    state.data_to_send()
    announced: set[int] = set()
    steps = 0
    goaway_code: int | None = None
    for chunk in chunks:
        closed_before = state.closed
        events = list(state.receive(chunk))  # raises nothing
        if closed_before:
            assert events == [] and state.data_to_send() == b"", "a closed connection went on"
            continue
        for event in events:
            if isinstance(event, RequestReceived):
                stream = event.stream
                assert stream.id % 2 == 1 and stream.id not in announced, f"stream {stream.id} announced again"
                announced.add(stream.id)
                stream.events = Handler()
            elif isinstance(event, DataReceived):
                stream = event.stream
                assert stream.id in announced, f"data for stream {stream.id}, never announced"
                if stream.events is not None:
                    stream.events.data_received(event.data, event.end_stream)
            elif isinstance(event, StreamReset):
                event.events.stream_reset()
                continue
            else:
                continue
            if actions:
                act(stream, actions[steps % len(actions)])
                steps += 1
        for kind, _, stream_id, payload in parse_frames(state.data_to_send()):
            assert len(payload) <= max(state.peer_max_frame, 16_384)
            if kind == GOAWAY:
                assert stream_id == 0 and len(payload) >= 8
                goaway_code = int.from_bytes(payload[4:8], "big")
        assert len(state._streams) <= MAX_STREAMS
        # What is kept and what is waited for: one frame at most, never a larger one.
        assert len(state._buffer) < 9 + LIMITS.max_frame_size, "more than one partial frame was kept"
        assert state._need <= 9 + LIMITS.max_frame_size, f"waiting for a frame of {state._need} bytes"
        if goaway_code is not None and goaway_code != ErrorCode.NO_ERROR:
            assert state.closed, "a connection error did not close the connection"


# -- HPACK ---------------------------------------------------------------------------------


TABLE_SIZES = st.sampled_from([0, 64, 256, 4096])
BLOCK_COUNTS = st.integers(1, 6)


@st.composite
def encoded_blocks(draw) -> list[tuple[bytes, list[tuple[str, str]]]]:
    """Blocks of one connection as hpack's encoder writes them, with the fields they carry."""
    encoder = hpack.Encoder()
    blocks = []
    for _ in range(draw(BLOCK_COUNTS)):
        if draw(SMALL) < 4:
            encoder.header_table_size = draw(TABLE_SIZES)
        fields = draw(header_fields)
        sent = [hpack.NeverIndexedHeaderTuple(*f) if draw(SMALL) < 2 else f for f in fields]
        blocks.append((encoder.encode(sent, huffman=draw(SMALL) < 14), [tuple(f) for f in fields]))
    return blocks


@fuzz_settings(500)
@given(encoded_blocks())
def test_hpack_blocks_decode_as_the_hpack_package_encoded_them(blocks):
    decoder = HeaderDecoder()
    for block, fields in blocks:
        assert decoder.decode(block) == fields


def hpack_reading(block: bytes) -> list[tuple[str, str]] | None:
    """What the `hpack` package reads in `block` (None: it refuses it), text decoded as ours is."""
    try:
        fields = hpack.Decoder().decode(block, raw=True)
    except hpack.HPACKError:
        return None
    return [(n.decode("utf-8", "replace"), v.decode("utf-8", "replace")) for n, v in fields]


@st.composite
def mutated_blocks(draw) -> bytes:
    """A block of hpack's encoder with one to three bytes changed."""
    block = bytearray(hpack.Encoder().encode(draw(header_fields), huffman=draw(SMALL) < 14))
    for _ in range(1 + draw(SMALL) % 3):
        if block:
            block[(draw(BYTE) << 8 | draw(BYTE)) % len(block)] = draw(BYTE)
    return bytes(block)


RANDOM_OR_MUTATED = st.one_of(st.binary(max_size=64), mutated_blocks())


@fuzz_settings(2000)
@given(RANDOM_OR_MUTATED)
def test_hpack_refuses_bad_blocks_with_its_own_error_and_agrees_with_hpack_on_good_ones(block):
    decoder = HeaderDecoder()
    theirs = hpack_reading(block)
    try:
        ours = decoder.decode(block)
    except HeaderCompressionError as exc:
        assert str(exc), "an error that names nothing"
        assert theirs is None, f"hpack reads {theirs!r} in a block refused as {exc}"
        return
    assert decoder._dynamic_bytes <= decoder._table_size <= decoder.max_table_size
    assert ours == theirs
