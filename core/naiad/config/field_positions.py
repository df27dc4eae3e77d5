"""Where each field of a config's protobuf text stands: its path and the line and column
of its name.

Python's protobuf keeps no positions once text is parsed (C++'s `ParseInfoTree` has no
Python counterpart), so the text is walked again with protobuf's own tokenizer, after the
real parser accepted it. Two readers need the walk: the fields a user wrote, zeros
included (`written_fields`), and the line a config error points at (`naiad check`).
A field is named by its path: `max_batch_size`, `instance_group[0].count`,
`input[1].dims`; a message field is recorded too (`input[1]`, `dynamic_batching`).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor

__all__ = ["FieldPosition", "field_positions"]


@dataclass(frozen=True, slots=True)
class FieldPosition:
    """The first place a field is written: `line` and `column` count from 1. `scalar`:
    the field holds a value (not a message); `in_map`: it belongs to a map's entry
    (`parameters`), whose keys are the user's, not the config's fields."""

    line: int
    column: int
    scalar: bool
    in_map: bool = False


def field_positions(text: str, descriptor: Descriptor) -> dict[str, FieldPosition]:
    """Every field `text` (protobuf text a parser accepted) writes, by path, in order."""
    tokenizer = text_format.Tokenizer(text.splitlines())
    found: dict[str, FieldPosition] = {}
    try:
        _walk(tokenizer, descriptor, "", found, closing=None, in_map=False)
    except text_format.ParseError:
        # Text the real parser took but this walk cannot read: what was read so far holds.
        pass
    return found


def _walk(
    tokenizer: text_format.Tokenizer,
    descriptor: Descriptor,
    prefix: str,
    found: dict[str, FieldPosition],
    closing: str | None,
    in_map: bool,
) -> None:
    counts: dict[str, int] = {}
    while not (tokenizer.AtEnd() if closing is None else tokenizer.TryConsume(closing)):
        name = tokenizer.ConsumeIdentifierOrNumber()
        line, column = _previous_token(tokenizer)
        field = descriptor.fields_by_name.get(name)
        if field is None:  # the parser accepted the text, so this cannot happen; stop reading
            return
        tokenizer.TryConsume(":")
        listed = tokenizer.TryConsume("[")
        while not (listed and tokenizer.TryConsume("]")):
            if field.message_type is None:
                _skip_scalar(tokenizer)
                found.setdefault(prefix + name, FieldPosition(line, column, scalar=True, in_map=in_map))
            else:
                index = counts.get(name, 0)
                counts[name] = index + 1
                path = f"{prefix}{name}[{index}]" if field.is_repeated else prefix + name
                closer = "}" if tokenizer.TryConsume("{") else ">"
                if closer == ">":
                    tokenizer.Consume("<")
                # In a list (`input [ {...}, {...} ]`) each element starts at its brace.
                at = _previous_token(tokenizer) if listed else (line, column)
                found.setdefault(path, FieldPosition(*at, scalar=False, in_map=in_map))
                entry = in_map or field.message_type.GetOptions().map_entry
                _walk(tokenizer, field.message_type, path + ".", found, closer, entry)
            if not listed:
                break
            tokenizer.TryConsume(",")
        if listed and field.message_type is None:
            # An empty list `dims: []` writes the field too.
            found.setdefault(prefix + name, FieldPosition(line, column, scalar=True, in_map=in_map))
        if not tokenizer.TryConsume(";"):
            tokenizer.TryConsume(",")


def _previous_token(tokenizer: text_format.Tokenizer) -> tuple[int, int]:
    """(line, column) of the token just read: the tokenizer's public way to it is the
    error it would raise there (types-protobuf types its argument wrongly)."""
    where = tokenizer.ParseErrorPreviousToken("")  # type: ignore[arg-type]
    return where.GetLine() or 0, where.GetColumn() or 0


def _skip_scalar(tokenizer: text_format.Tokenizer) -> None:
    if tokenizer.token[:1] in ("'", '"'):
        while tokenizer.token[:1] in ("'", '"'):  # adjacent strings concatenate
            tokenizer.NextToken()
        return
    tokenizer.TryConsume("-")
    tokenizer.NextToken()
