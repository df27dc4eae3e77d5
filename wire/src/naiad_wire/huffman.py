"""HPACK's Huffman code (RFC 7541 Appendix B) and a decoder for it.

Our own rather than the `hpack` package's: its decoder and tables live in modules outside its
public API (`hpack.huffman_table`), which may change in any release. The code below is the
RFC's data; the decoder walks it four bits at a time through a table of 16 transitions per
node of the code's tree, built on first use (4,096 entries, a few milliseconds), which
emits at most one symbol per step because no code is shorter than five bits.
"""

from __future__ import annotations

__all__ = ["HuffmanError", "decode_huffman", "CODES"]

# (code, length in bits) of each symbol 0..255, then EOS (256).
CODES: tuple[tuple[int, int], ...] = (
    (0x1FF8, 13),
    (0x7FFFD8, 23),
    (0xFFFFFE2, 28),
    (0xFFFFFE3, 28),
    (0xFFFFFE4, 28),
    (0xFFFFFE5, 28),
    (0xFFFFFE6, 28),
    (0xFFFFFE7, 28),
    (0xFFFFFE8, 28),
    (0xFFFFEA, 24),
    (0x3FFFFFFC, 30),
    (0xFFFFFE9, 28),
    (0xFFFFFEA, 28),
    (0x3FFFFFFD, 30),
    (0xFFFFFEB, 28),
    (0xFFFFFEC, 28),
    (0xFFFFFED, 28),
    (0xFFFFFEE, 28),
    (0xFFFFFEF, 28),
    (0xFFFFFF0, 28),
    (0xFFFFFF1, 28),
    (0xFFFFFF2, 28),
    (0x3FFFFFFE, 30),
    (0xFFFFFF3, 28),
    (0xFFFFFF4, 28),
    (0xFFFFFF5, 28),
    (0xFFFFFF6, 28),
    (0xFFFFFF7, 28),
    (0xFFFFFF8, 28),
    (0xFFFFFF9, 28),
    (0xFFFFFFA, 28),
    (0xFFFFFFB, 28),
    (0x14, 6),
    (0x3F8, 10),
    (0x3F9, 10),
    (0xFFA, 12),
    (0x1FF9, 13),
    (0x15, 6),
    (0xF8, 8),
    (0x7FA, 11),
    (0x3FA, 10),
    (0x3FB, 10),
    (0xF9, 8),
    (0x7FB, 11),
    (0xFA, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1A, 6),
    (0x1B, 6),
    (0x1C, 6),
    (0x1D, 6),
    (0x1E, 6),
    (0x1F, 6),
    (0x5C, 7),
    (0xFB, 8),
    (0x7FFC, 15),
    (0x20, 6),
    (0xFFB, 12),
    (0x3FC, 10),
    (0x1FFA, 13),
    (0x21, 6),
    (0x5D, 7),
    (0x5E, 7),
    (0x5F, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6A, 7),
    (0x6B, 7),
    (0x6C, 7),
    (0x6D, 7),
    (0x6E, 7),
    (0x6F, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xFC, 8),
    (0x73, 7),
    (0xFD, 8),
    (0x1FFB, 13),
    (0x7FFF0, 19),
    (0x1FFC, 13),
    (0x3FFC, 14),
    (0x22, 6),
    (0x7FFD, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2A, 6),
    (0x7, 5),
    (0x2B, 6),
    (0x76, 7),
    (0x2C, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2D, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7A, 7),
    (0x7B, 7),
    (0x7FFE, 15),
    (0x7FC, 11),
    (0x3FFD, 14),
    (0x1FFD, 13),
    (0xFFFFFFC, 28),
    (0xFFFE6, 20),
    (0x3FFFD2, 22),
    (0xFFFE7, 20),
    (0xFFFE8, 20),
    (0x3FFFD3, 22),
    (0x3FFFD4, 22),
    (0x3FFFD5, 22),
    (0x7FFFD9, 23),
    (0x3FFFD6, 22),
    (0x7FFFDA, 23),
    (0x7FFFDB, 23),
    (0x7FFFDC, 23),
    (0x7FFFDD, 23),
    (0x7FFFDE, 23),
    (0xFFFFEB, 24),
    (0x7FFFDF, 23),
    (0xFFFFEC, 24),
    (0xFFFFED, 24),
    (0x3FFFD7, 22),
    (0x7FFFE0, 23),
    (0xFFFFEE, 24),
    (0x7FFFE1, 23),
    (0x7FFFE2, 23),
    (0x7FFFE3, 23),
    (0x7FFFE4, 23),
    (0x1FFFDC, 21),
    (0x3FFFD8, 22),
    (0x7FFFE5, 23),
    (0x3FFFD9, 22),
    (0x7FFFE6, 23),
    (0x7FFFE7, 23),
    (0xFFFFEF, 24),
    (0x3FFFDA, 22),
    (0x1FFFDD, 21),
    (0xFFFE9, 20),
    (0x3FFFDB, 22),
    (0x3FFFDC, 22),
    (0x7FFFE8, 23),
    (0x7FFFE9, 23),
    (0x1FFFDE, 21),
    (0x7FFFEA, 23),
    (0x3FFFDD, 22),
    (0x3FFFDE, 22),
    (0xFFFFF0, 24),
    (0x1FFFDF, 21),
    (0x3FFFDF, 22),
    (0x7FFFEB, 23),
    (0x7FFFEC, 23),
    (0x1FFFE0, 21),
    (0x1FFFE1, 21),
    (0x3FFFE0, 22),
    (0x1FFFE2, 21),
    (0x7FFFED, 23),
    (0x3FFFE1, 22),
    (0x7FFFEE, 23),
    (0x7FFFEF, 23),
    (0xFFFEA, 20),
    (0x3FFFE2, 22),
    (0x3FFFE3, 22),
    (0x3FFFE4, 22),
    (0x7FFFF0, 23),
    (0x3FFFE5, 22),
    (0x3FFFE6, 22),
    (0x7FFFF1, 23),
    (0x3FFFFE0, 26),
    (0x3FFFFE1, 26),
    (0xFFFEB, 20),
    (0x7FFF1, 19),
    (0x3FFFE7, 22),
    (0x7FFFF2, 23),
    (0x3FFFE8, 22),
    (0x1FFFFEC, 25),
    (0x3FFFFE2, 26),
    (0x3FFFFE3, 26),
    (0x3FFFFE4, 26),
    (0x7FFFFDE, 27),
    (0x7FFFFDF, 27),
    (0x3FFFFE5, 26),
    (0xFFFFF1, 24),
    (0x1FFFFED, 25),
    (0x7FFF2, 19),
    (0x1FFFE3, 21),
    (0x3FFFFE6, 26),
    (0x7FFFFE0, 27),
    (0x7FFFFE1, 27),
    (0x3FFFFE7, 26),
    (0x7FFFFE2, 27),
    (0xFFFFF2, 24),
    (0x1FFFE4, 21),
    (0x1FFFE5, 21),
    (0x3FFFFE8, 26),
    (0x3FFFFE9, 26),
    (0xFFFFFFD, 28),
    (0x7FFFFE3, 27),
    (0x7FFFFE4, 27),
    (0x7FFFFE5, 27),
    (0xFFFEC, 20),
    (0xFFFFF3, 24),
    (0xFFFED, 20),
    (0x1FFFE6, 21),
    (0x3FFFE9, 22),
    (0x1FFFE7, 21),
    (0x1FFFE8, 21),
    (0x7FFFF3, 23),
    (0x3FFFEA, 22),
    (0x3FFFEB, 22),
    (0x1FFFFEE, 25),
    (0x1FFFFEF, 25),
    (0xFFFFF4, 24),
    (0xFFFFF5, 24),
    (0x3FFFFEA, 26),
    (0x7FFFF4, 23),
    (0x3FFFFEB, 26),
    (0x7FFFFE6, 27),
    (0x3FFFFEC, 26),
    (0x3FFFFED, 26),
    (0x7FFFFE7, 27),
    (0x7FFFFE8, 27),
    (0x7FFFFE9, 27),
    (0x7FFFFEA, 27),
    (0x7FFFFEB, 27),
    (0xFFFFFFE, 28),
    (0x7FFFFEC, 27),
    (0x7FFFFED, 27),
    (0x7FFFFEE, 27),
    (0x7FFFFEF, 27),
    (0x7FFFFF0, 27),
    (0x3FFFFEE, 26),
    (0x3FFFFFFF, 30),
)
_EOS = 256
# What a transition emits besides a symbol: nothing yet, or the EOS symbol (an error, RFC
# 7541 5.2: "a Huffman-encoded string literal containing the EOS symbol MUST be treated as a
# decoding error").
_NOTHING = -1
_FAIL = -2


class HuffmanError(ValueError):
    """A Huffman string that is not valid under RFC 7541 5.2."""


class _Machine:
    """The decoder's table: for node `n` of the code's tree and the next four bits `b`,
    `next[n << 4 | b]` is the node reached and `emit[n << 4 | b]` the symbol completed on the
    way (or _NOTHING, _FAIL). `accepting[n]`: a string may end at node `n`, i.e. the bits
    since the last symbol are padding: at most seven, all ones (RFC 7541 5.2)."""

    def __init__(self) -> None:
        # children[node] = [zero, one]; a child >= 0 is a node, < 0 is -(symbol + 1).
        children: list[list[int]] = [[0, 0]]
        depth = [0]
        ones = [True]
        for symbol, (code, length) in enumerate(CODES):
            node = 0
            for shift in range(length - 1, -1, -1):
                bit = code >> shift & 1
                if shift == 0:
                    children[node][bit] = -(symbol + 1)
                    break
                child = children[node][bit]
                if child <= 0:  # 0 is the root: never anyone's child, so it marks "none yet"
                    child = len(children)
                    children.append([0, 0])
                    depth.append(depth[node] + 1)
                    ones.append(ones[node] and bit == 1)
                    children[node][bit] = child
                node = child
        self.next = [0] * (len(children) << 4)
        self.emit = [_NOTHING] * (len(children) << 4)
        self.accepting = [ones[n] and depth[n] <= 7 for n in range(len(children))]
        for start in range(len(children)):
            for bits in range(16):
                node, emitted = start, _NOTHING
                for shift in (3, 2, 1, 0):
                    child = children[node][bits >> shift & 1]
                    if child < 0:
                        emitted = _FAIL if -child - 1 == _EOS else -child - 1
                        node = 0
                    else:
                        node = child
                self.next[start << 4 | bits] = node
                self.emit[start << 4 | bits] = emitted


_machine: _Machine | None = None


def decode_huffman(raw: bytes) -> bytes:
    """The octets `raw` encodes; HuffmanError for EOS inside it or padding that is not a
    prefix of EOS of at most seven bits."""
    global _machine
    machine = _machine
    if machine is None:
        machine = _machine = _Machine()
    following = machine.next
    emit = machine.emit
    out = bytearray()
    state = 0
    for byte in raw:
        index = state << 4 | byte >> 4
        symbol = emit[index]
        if symbol >= 0:
            out.append(symbol)
        elif symbol == _FAIL:
            raise HuffmanError("the EOS symbol inside a Huffman string")
        state = following[index]
        index = state << 4 | byte & 0xF
        symbol = emit[index]
        if symbol >= 0:
            out.append(symbol)
        elif symbol == _FAIL:
            raise HuffmanError("the EOS symbol inside a Huffman string")
        state = following[index]
    if not machine.accepting[state]:
        raise HuffmanError("padding longer than seven bits or not all ones")
    return bytes(out)
