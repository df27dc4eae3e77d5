"""Which fields a user's config writes, zeros included, and which of them a load changed.

Protobuf 3 keeps no presence for scalar fields: once parsed, `max_batch_size: 0` and no
`max_batch_size` at all are the same message. Triton's auto-complete fills a field only
where the config does not give it, and a load must never quietly replace what the user
wrote, so the written fields are read from the config itself: the text of config.pbtxt
(walked with protobuf's own tokenizer, `field_positions`) or the keys of a
load's JSON override. A field is named by its path: `max_batch_size`,
`instance_group[0].count`, `input[1].dims`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .field_positions import field_positions

__all__ = ["changed_fields", "fields_written_in_dict", "fields_written_in_text"]


def fields_written_in_text(text: str, descriptor: Descriptor) -> frozenset[str]:
    """The scalar fields `text` (protobuf text a parser accepted) gives a value. A map's
    entries (parameters) are left out: no default touches them."""
    return frozenset(path for path, at in field_positions(text, descriptor).items() if at.scalar and not at.in_map)


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
