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

from google.protobuf.descriptor import Descriptor

from ..protos import model_config_pb2 as pb

__all__ = ["describe_unknown_field"]

_NO_FIELD = re.compile(r'Message type "(?P<type>[\w.]+)" has no field named "(?P<field>[^"]+)"(?: at "(?P<at>[^"]+)")?')


def describe_unknown_field(error: str) -> str | None:
    """`unknown field NAME[ in PATH]; did you mean NEAREST?` for a protobuf parse error
    about an unknown field (the known fields listed where none is near), else None."""
    found = _NO_FIELD.search(error)
    if found is None:
        return None
    descriptor = _message_type(found["type"])
    if descriptor is None:
        return None
    field = found["field"]
    # JSON keys may use either spelling; suggest in the one the user wrote.
    camel = any(c.isupper() for c in field)
    names = [f.json_name if camel else f.name for f in descriptor.fields]
    where = _where(found["at"], descriptor)
    nearest = difflib.get_close_matches(field, names, n=1, cutoff=0.6)
    if nearest:
        return f"unknown field {field}{where}; did you mean {nearest[0]}?"
    return f"unknown field {field}{where} (known fields: {', '.join(names)})"


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
