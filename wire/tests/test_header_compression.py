"""HPACK (RFC 7541): naiad_wire's decoder and encoder against the `hpack` package, an
implementation independent of ours."""

from __future__ import annotations

import random

import hpack
import pytest

from naiad_wire.header_compression import HeaderCompressionError, HeaderDecoder, encode_headers


def test_header_decoder_agrees_with_the_hpack_package():
    """Blocks from hpack's encoder (Huffman, indexing, never-indexed fields, table size
    changes, long values) decode to the same fields, block after block on one table."""
    rng = random.Random(7)
    encoder, decoder = hpack.Encoder(), HeaderDecoder()
    names = [":path", "content-type", "grpc-timeout", "x-tenant", "user-agent", "te", "a" * 200]
    for block_number in range(300):
        if block_number % 50 == 25:
            encoder.header_table_size = rng.choice([0, 256, 4096])
        fields = []
        for _ in range(rng.randint(1, 8)):
            value = "".join(rng.choice("abcXYZ019-_/%: ") for _ in range(rng.choice([0, 3, 40, 300])))
            field = (rng.choice(names), value)
            fields.append(hpack.NeverIndexedHeaderTuple(*field) if rng.random() < 0.1 else field)
        block = encoder.encode(fields, huffman=rng.random() < 0.7)
        assert decoder.decode(block) == [tuple(field) for field in fields]


def test_header_encoder_is_read_by_the_hpack_package():
    fields = [
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "0"),
        ("grpc-message", "x" * 300),
    ]
    assert hpack.Decoder().decode(encode_headers(fields)) == fields


def test_header_decoder_refuses_broken_blocks():
    for block in (b"\x80", b"\xff\xff\xff\xff\xff\xff\x01", b"\x40\x05ab", b"\xbe", b"\x3f\xe2\x1f"):
        with pytest.raises(HeaderCompressionError):
            HeaderDecoder().decode(block)


def test_a_repeated_block_decodes_the_same_until_the_dynamic_table_changes():
    """A client sends the same all-indexed block for every call, and the decoder keeps
    what it decoded; a block that changes the dynamic table shifts every index in it, so
    the same bytes then name other headers, and the decoder must see that."""
    encoder = hpack.Encoder()
    decoder = HeaderDecoder()
    first = [(":method", "POST"), (":path", "/a"), ("x-call", "one")]
    assert decoder.decode(encoder.encode(first)) == first
    repeated = encoder.encode(first)  # all indexed now: the same bytes every time
    assert encoder.encode(first) == repeated
    for _ in range(3):
        assert decoder.decode(repeated) == first
    # A new entry at the front of the dynamic table shifts the others down by one: the
    # repeated block's indexes (62: x-call one, 63: :path /a) now name other fields.
    assert decoder.decode(encoder.encode([("x-call", "two")])) == [("x-call", "two")]
    assert decoder.decode(repeated) == [(":method", "POST"), ("x-call", "one"), ("x-call", "two")]


def test_huffman_strings_are_decoded_once_per_process_within_bounds():
    """A new connection's first block is all Huffman literals, the same on every connection
    of a client: the second connection finds them decoded. Long strings, values marked never
    indexed, and anything past the memo's size are decoded every time.

    Seen from outside, as compiled code calls the decoder directly: a string the memo holds is
    read from it (a planted text comes back), one it must not hold is decoded afresh."""
    from naiad_wire import header_compression

    memo = header_compression._huffman
    memo.clear()
    fields = [(":path", "/inference.GRPCInferenceService/ModelInfer"), ("user-agent", "grpc-python/1.0")]
    first = hpack.Encoder().encode(fields, huffman=True)
    assert HeaderDecoder().decode(first) == fields
    assert sorted(memo.values()) == sorted(value for _, value in fields)
    for raw in memo:
        memo[raw] = "planted"
    assert HeaderDecoder().decode(first) == [(":path", "planted"), ("user-agent", "planted")]  # another connection

    memo.clear()
    secret = [hpack.NeverIndexedHeaderTuple("authorization", "Bearer abc")]
    long_value = [("user-agent", "v" * 200)]
    for block, expected in (
        (hpack.Encoder().encode(secret, huffman=True), [("authorization", "Bearer abc")]),
        (hpack.Encoder().encode(long_value, huffman=True), long_value),
    ):
        assert HeaderDecoder().decode(block) == expected
        assert expected[0][1] not in memo.values(), "a value that must not be memoised was"

    for i in range(3 * header_compression._HUFFMAN_ENTRIES):
        HeaderDecoder().decode(hpack.Encoder().encode([("x-n", f"value-{i}")], huffman=True))
    assert 0 < len(memo) <= header_compression._HUFFMAN_ENTRIES
