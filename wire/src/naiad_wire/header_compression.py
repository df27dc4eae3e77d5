"""HPACK (RFC 7541) for naiad's HTTP/2 server: a decoder fast on the header blocks gRPC
clients send again and again, and a stateless encoder for the few headers a server writes.

Why not `hpack.Decoder`: it takes ~25 us for a block of eight indexed fields, a good part of a
small request's server time. This decoder keeps the same table semantics with a tight loop
over the block and memoised Huffman strings (2.6 us for the same block). The static table
and the Huffman code are the RFC's data, written out in `static_table.py` and `huffman.py`:
nothing is borrowed from the `hpack` package, whose tables are outside its public API.

The Huffman memo is one per process, not per connection: the first block of a new
connection is all literals (h2load's first request: five Huffman strings, ~45 us of pure
Python decoding), and clients open many connections that send the same strings. Only short
strings are kept, never a value the peer marked "never indexed" (RFC 7541 7.1.3), and the
memo is emptied when full, so it stays under ~300 KB whatever peers send.

The encoder never adds to the peer's dynamic table ("literal without indexing"), so it
keeps no state and a response's header block can be computed once and reused.
"""

from __future__ import annotations

from collections import deque

from .huffman import HuffmanError, decode_huffman
from .static_table import STATIC_TABLE

__all__ = ["HeaderDecoder", "HeaderCompressionError", "encode_headers", "TABLE_SIZE_ZERO"]

_STATIC: list[tuple[str, str]] = [("", ""), *STATIC_TABLE]  # index 0 is no field
_STATIC_COUNT = len(_STATIC) - 1  # 61
_STATIC_NAME_INDEX: dict[str, int] = {}
for _index, (_name, _value) in enumerate(_STATIC):
    if _index:
        _STATIC_NAME_INDEX.setdefault(_name, _index)

# The block a server sends after the peer shrinks SETTINGS_HEADER_TABLE_SIZE: "my dynamic
# table is now 0 bytes" (this encoder never uses one).
TABLE_SIZE_ZERO = b"\x20"

_ENTRY_OVERHEAD = 32  # RFC 7541 section 4.1
# The process's Huffman memo: at most this many strings of at most this many encoded bytes.
_HUFFMAN_ENTRIES = 1024
_HUFFMAN_MAX_BYTES = 64
_huffman: dict[bytes, str] = {}
# At most this many decoded blocks of at most this many bytes each, per connection.
_BLOCK_CACHE_ENTRIES = 64
_BLOCK_CACHE_BYTES = 1024


class HeaderCompressionError(Exception):
    """A header block that cannot be decoded: a connection error (COMPRESSION_ERROR)."""


class HeaderDecoder:
    """Decodes the header blocks of one connection, in the order they arrive."""

    def __init__(self, max_table_size: int = 4096, max_header_list_size: int = 1 << 20) -> None:
        self.max_table_size = max_table_size  # our SETTINGS_HEADER_TABLE_SIZE
        self.max_header_list_size = max_header_list_size
        self._table_size = max_table_size  # the peer's current choice, <= max_table_size
        self._dynamic: deque[tuple[str, str, int]] = deque()  # newest first; (name, value, size)
        self._dynamic_bytes = 0
        # Blocks that changed nothing in the dynamic table, decoded: a client repeats the
        # same block (all indexed fields) for every call, and while the table stays as it
        # is, the same bytes mean the same headers. Any change to the table empties it.
        self._blocks: dict[bytes, tuple[tuple[str, str], ...]] = {}

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        known = self._blocks.get(block)
        if known is not None:
            return list(known)
        table_changed = False
        headers: list[tuple[str, str]] = []
        append = headers.append
        dynamic = self._dynamic
        size = 0
        position = 0
        end = len(block)
        try:
            while position < end:
                first = block[position]
                if first & 0x80:  # indexed field
                    index = first & 0x7F
                    position += 1
                    if index == 0x7F:
                        index, position = self._integer(block, position, 0x7F)
                    if index <= _STATIC_COUNT:
                        if index == 0:
                            raise HeaderCompressionError("indexed header field 0")
                        name, value = _STATIC[index]
                    else:
                        name, value, _ = dynamic[index - _STATIC_COUNT - 1]
                elif first & 0x40:  # literal with incremental indexing
                    name, value, position = self._literal(block, position, 0x3F)
                    self._add(name, value)
                    table_changed = True
                elif first & 0x20:  # dynamic table size update
                    if headers:  # RFC 7541 4.2: only at the start of a block
                        raise HeaderCompressionError("dynamic table size update after a header field")
                    new_size, position = self._integer(block, position + 1, 0x1F, first & 0x1F)
                    if new_size > self.max_table_size:
                        raise HeaderCompressionError(
                            f"table size update to {new_size} exceeds the advertised {self.max_table_size}"
                        )
                    self._table_size = new_size
                    self._evict()
                    table_changed = True
                    continue
                else:  # literal without indexing (0000) or never indexed (0001)
                    name, value, position = self._literal(block, position, 0x0F, not first & 0x10)
                size += len(name) + len(value) + _ENTRY_OVERHEAD
                append((name, value))
        except IndexError:
            raise HeaderCompressionError("truncated header block or index out of range") from None
        if size > self.max_header_list_size:
            raise HeaderCompressionError(
                f"header list of {size} bytes exceeds the limit of {self.max_header_list_size}"
            )
        if table_changed:
            self._blocks.clear()
        elif len(block) <= _BLOCK_CACHE_BYTES and len(self._blocks) < _BLOCK_CACHE_ENTRIES:
            self._blocks[block] = tuple(headers)
        return headers

    @staticmethod
    def _integer(block: bytes, position: int, mask: int, value: int | None = None) -> tuple[int, int]:
        """An RFC 7541 5.1 integer whose prefix has been read (`value`, or the whole mask when
        None means "read the continuation bytes from `position`")."""
        if value is not None and value < mask:
            return value, position
        value = mask
        shift = 0
        while True:
            byte = block[position]
            position += 1
            value += (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, position
            if shift > 28:
                raise HeaderCompressionError("integer too large")

    def _string(self, block: bytes, position: int, memo: bool = True) -> tuple[str, int]:
        first = block[position]
        length = first & 0x7F
        position += 1
        if length == 0x7F:
            length, position = self._integer(block, position, 0x7F)
        raw = block[position : position + length]
        if len(raw) != length:
            raise HeaderCompressionError("truncated string literal")
        position += length
        if not first & 0x80:
            return raw.decode("utf-8", "replace"), position
        memo = memo and length <= _HUFFMAN_MAX_BYTES
        text = _huffman.get(raw) if memo else None
        if text is None:
            try:
                text = decode_huffman(raw).decode("utf-8", "replace")
            except HuffmanError as exc:
                raise HeaderCompressionError(f"bad Huffman string: {exc}") from None
            if memo:
                if len(_huffman) >= _HUFFMAN_ENTRIES:
                    _huffman.clear()
                _huffman[raw] = text
        return text, position

    def _literal(self, block: bytes, position: int, mask: int, memo: bool = True) -> tuple[str, str, int]:
        """A literal field; `memo` False for a never-indexed one, whose value is not memoised."""
        index = block[position] & mask
        position += 1
        if index == mask:
            index, position = self._integer(block, position, mask)
        if index:
            if index <= _STATIC_COUNT:
                name = _STATIC[index][0]
            else:
                name = self._dynamic[index - _STATIC_COUNT - 1][0]
        else:
            name, position = self._string(block, position)
        value, position = self._string(block, position, memo)
        return name, value, position

    def _add(self, name: str, value: str) -> None:
        entry_size = len(name.encode()) + len(value.encode()) + _ENTRY_OVERHEAD
        if entry_size > self._table_size:  # an entry larger than the table empties it
            self._dynamic.clear()
            self._dynamic_bytes = 0
            return
        self._dynamic.appendleft((name, value, entry_size))
        self._dynamic_bytes += entry_size
        self._evict()

    def _evict(self) -> None:
        while self._dynamic_bytes > self._table_size:
            self._dynamic_bytes -= self._dynamic.pop()[2]


def _encode_integer(value: int, prefix_bits: int, first: int) -> bytes:
    mask = (1 << prefix_bits) - 1
    if value < mask:
        return bytes([first | value])
    out = bytearray([first | mask])
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _encode_integer(len(raw), 7, 0) + raw


def encode_headers(headers: list[tuple[str, str]]) -> bytes:
    """A header block of literals without indexing; a field of the static table (name and
    value) is sent as its index, a static name by its index."""
    out = bytearray()
    for name, value in headers:
        try:
            out += _encode_integer(_STATIC.index((name, value)), 7, 0x80)
            continue
        except ValueError:
            pass
        name_index = _STATIC_NAME_INDEX.get(name)
        if name_index is not None:
            out += _encode_integer(name_index, 4, 0x00)
        else:
            out += b"\x00" + _encode_string(name)
        out += _encode_string(value)
    return bytes(out)
