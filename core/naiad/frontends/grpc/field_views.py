"""A large request's tensor bytes read in place: the protobuf parser copies every bytes field
it reads, and reading one from the parsed message copies it again, so a 1 MB image in
`raw_input_contents` costs two extra copies before its tensor views it. `split_field` walks
the top level of an encoded message (no schema needed), hands the occurrences of one
length-delimited field back as views of the received bytes, and leaves the other fields, a
few hundred bytes, to the parser."""

from __future__ import annotations

__all__ = ["split_field"]

_LENGTH_DELIMITED = 2


def split_field(data: bytes, start: int, end: int, number: int) -> tuple[bytes, list[memoryview]] | None:
    """The message `data[start:end]` without the top-level occurrences of field `number`, and
    their payloads as read-only views of `data`, in order. None when the message is not one
    this walk vouches for (a malformed message, a group, the field in another wire type):
    the caller then parses it whole, and the parser says what is wrong."""
    kept: list[bytes] = []
    views: list[memoryview] = []
    whole = memoryview(data)
    run = start  # where the fields kept since the last taken one begin
    position = start
    while position < end:
        field_start = position
        tag, position = _varint(data, position, end)
        if tag < 0:
            return None
        wire = tag & 7
        if wire == 0:
            _, position = _varint(data, position, end)
            if position < 0:
                return None
        elif wire == 1:
            position += 8
        elif wire == 5:
            position += 4
        elif wire == _LENGTH_DELIMITED:
            length, position = _varint(data, position, end)
            if length < 0:
                return None
            if tag >> 3 == number:
                if position + length > end:
                    return None
                if run < field_start:
                    kept.append(data[run:field_start])
                views.append(whole[position : position + length])
                position += length
                run = position
                continue
            position += length
        else:
            return None  # groups (wire types 3 and 4) and invalid wire types
        if tag >> 3 == number:
            return None  # the field in a wire type it cannot have
        if position > end:
            return None
    if run < end:
        kept.append(data[run:end])
    return b"".join(kept), views


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """The varint at `position` and where the next field starts; (-1, -1) when it runs past
    `end` or over ten bytes."""
    value = 0
    shift = 0
    while position < end and shift < 70:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return -1, -1
