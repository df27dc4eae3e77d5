"""Turns protobuf's "no field named" parse error into one that suggests the field meant.

Both protobuf parsers (text format for config.pbtxt, JSON for a load's config override) name
the message type and the unknown field, at any nesting level; the type's descriptor has
every field it does know, so the nearest one is a lookup away. A misspelt field is the
most common config mistake, and protobuf's own words ("Message type
"inference.ModelConfig" has no field named ...") do not say what would have been right.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor

from ..protos import model_config_pb2 as pb

__all__ = ["UnknownField", "describe_unknown_field", "find_unknown_field", "nearest_name"]

_NO_FIELD = re.compile(r'Message type "(?P<type>[\w.]+)" has no field named "(?P<field>[^"]+)"(?: at "(?P<at>[^"]+)")?')


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A field protobuf did not know: its name, where it stood (" in dynamic_batching",
    or ""), the nearest known name (None when none is near) and every known name."""

    field: str
    where: str
    nearest: str | None
    known: tuple[str, ...]

    def describe(self) -> str:
        if self.nearest is not None:
            return f"unknown field {self.field}{self.where}; did you mean {self.nearest}?"
        return f"unknown field {self.field}{self.where} (known fields: {', '.join(self.known)})"


def describe_unknown_field(error: str) -> str | None:
    """`unknown field NAME[ in PATH]; did you mean NEAREST?` for a protobuf parse error
    about an unknown field (the known fields listed where none is near), else None."""
    found = find_unknown_field(error)
    return found.describe() if found is not None else None


def find_unknown_field(error: str) -> UnknownField | None:
    """The unknown field a protobuf parse error names, else None."""
    found = _NO_FIELD.search(error)
    if found is None:
        return None
    descriptor = _message_type(found["type"])
    if descriptor is None:
        return None
    field = found["field"]
    # JSON keys may use either spelling; suggest in the one the user wrote.
    camel = any(c.isupper() for c in field)
    names = tuple(f.json_name if camel else f.name for f in descriptor.fields)
    return UnknownField(field, _where(found["at"], descriptor), nearest_name(field, names), names)


def nearest_name(word: str, names: Sequence[str]) -> str | None:
    """The name of `names` nearest to a misspelt `word`, None when none is near."""
    nearest = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return nearest[0] if nearest else None


def _message_type(full_name: str) -> Descriptor | None:
    try:
        return pb.DESCRIPTOR.pool.FindMessageTypeByName(full_name)
    except KeyError:
        return None


def _where(at: str | None, descriptor: Descriptor) -> str:
    """Where the field stood: the JSON parser's path less its root ("dynamic_batching",
    "input[0]"); the text parser gives a line instead, so the enclosing message type."""
    if at is not None:
        _, _, path = at.partition(".")
        return f" in {path}" if path else ""
    if descriptor.full_name == pb.ModelConfig.DESCRIPTOR.full_name:
        return ""
    return f" in a {descriptor.name} message"
