"""Which fields a user's config writes, zeros included, and which of them a load changed.

Protobuf 3 keeps no presence for scalar fields: once parsed, `max_batch_size: 0` and no
`max_batch_size` at all are the same message. Triton's auto-complete fills a field only
where the config does not give it, and a load must never quietly replace what the user
wrote, so the written fields are read from the config itself: the text of config.pbtxt
(walked with protobuf's own tokenizer, after the real parser accepted it) or the keys of a
load's JSON override. A field is named by its path: `max_batch_size`,
`instance_group[0].count`, `input[1].dims`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["changed_fields", "fields_written_in_dict", "fields_written_in_text"]


def fields_written_in_text(text: str, descriptor: Descriptor) -> frozenset[str]:
    """The scalar fields `text` (protobuf text a parser accepted) gives a value."""
    tokenizer = text_format.Tokenizer(text.splitlines())
    written: set[str] = set()
    try:
        _walk_text(tokenizer, descriptor, "", written, closing=None)
    except text_format.ParseError:
        # Text the real parser took but this walk cannot read: what was read so far still
        # holds, and a load must not fail over its warnings.
        pass
    return frozenset(written)


def _walk_text(
    tokenizer: text_format.Tokenizer, descriptor: Descriptor, prefix: str, written: set[str], closing: str | None
) -> None:
    counts: dict[str, int] = {}
    while not (tokenizer.AtEnd() if closing is None else tokenizer.TryConsume(closing)):
        name = tokenizer.ConsumeIdentifierOrNumber()
        field = descriptor.fields_by_name.get(name)
        if field is None:  # the parser accepted the text, so this cannot happen; stop reading
            return
        tokenizer.TryConsume(":")
        listed = tokenizer.TryConsume("[")
        while not (listed and tokenizer.TryConsume("]")):
            if field.message_type is None:
                _skip_scalar(tokenizer)
                written.add(prefix + name)
            else:
                index = counts.get(name, 0)
                counts[name] = index + 1
                path = f"{prefix}{name}[{index}]" if field.is_repeated else prefix + name
                closer = "}" if tokenizer.TryConsume("{") else ">"
                if closer == ">":
                    tokenizer.Consume("<")
                # A map's entries (parameters) are read past, not named: no default touches them.
                into = set() if field.message_type.GetOptions().map_entry else written
                _walk_text(tokenizer, field.message_type, path + ".", into, closer)
            if not listed:
                break
            tokenizer.TryConsume(",")
        if listed and field.message_type is None:
            written.add(prefix + name)  # an empty list `dims: []` writes the field too
        if not tokenizer.TryConsume(";"):
            tokenizer.TryConsume(",")


def _skip_scalar(tokenizer: text_format.Tokenizer) -> None:
    if tokenizer.token[:1] in ("'", '"'):
        while tokenizer.token[:1] in ("'", '"'):  # adjacent strings concatenate
            tokenizer.NextToken()
        return
    tokenizer.TryConsume("-")
    tokenizer.NextToken()


def fields_written_in_dict(data: Mapping[str, Any], descriptor: Descriptor, prefix: str = "") -> frozenset[str]:
    """The scalar fields a config in Triton's JSON form gives a value (either key spelling)."""
    written: set[str] = set()
    by_key = {**{f.json_name: f for f in descriptor.fields}, **descriptor.fields_by_name}
    for key, value in data.items():
        field = by_key.get(key)
        if field is None:
            continue
        path = prefix + field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            continue  # as in the text: no default touches a map's entries
        if field.message_type is None:
            written.add(path)
        elif field.is_repeated and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    written |= fields_written_in_dict(item, field.message_type, f"{path}[{index}].")
        elif isinstance(value, Mapping):
            written |= fields_written_in_dict(value, field.message_type, path + ".")
    return frozenset(written)


def changed_fields(before: Message, after: Message, written: Iterable[str]) -> list[tuple[str, object, object]]:
    """(path, value before, value after) for each written field whose value differs."""
    changes = []
    for path in sorted(written):
        old, new = _value_at(before, path), _value_at(after, path)
        if old != new:
            changes.append((path, old, new))
    return changes


def _value_at(message: Message, path: str) -> object:
    value: Any = message
    for part in path.split("."):
        name, _, index = part.partition("[")
        field: FieldDescriptor | None = value.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            return None
        value = getattr(value, name)
        if index:
            position = int(index.rstrip("]"))
            if position >= len(value):
                return None
            value = value[position]
        elif field.is_repeated:
            value = list(value) if field.message_type is None else value
    if isinstance(value, int) and not isinstance(value, bool):
        return _enum_name(message, path, value)
    return value


def _enum_name(message: Message, path: str, value: int) -> object:
    """An enum field's value by name (KIND_CPU, not 2), as the user writes it."""
    descriptor = message.DESCRIPTOR
    field = None
    for part in path.split("."):
        field = descriptor.fields_by_name.get(part.partition("[")[0]) if descriptor is not None else None
        descriptor = field.message_type if field is not None else None
    if field is not None and field.enum_type is not None and value in field.enum_type.values_by_number:
        return field.enum_type.values_by_number[value].name
    return value
