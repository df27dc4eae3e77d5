"""Value parsers shared by the command-line flags and the backend settings: one boolean rule
for every `true`/`false` a user types."""

from __future__ import annotations

import argparse

__all__ = ["BOOLEAN_WORDS", "bool_of", "parse_bool"]

# tritonserver's boolean flag values (true/false, 1/0), with yes/no and on/off; any case.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
#: How messages name the accepted spellings.
BOOLEAN_WORDS = "true or false (1/0, yes/no, on/off)"


def bool_of(text: str) -> bool | None:
    """The boolean `text` spells (surrounding blanks and case aside), or None when it
    spells none: callers raise their own error naming the setting."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


def parse_bool(text: str) -> bool:
    """A boolean flag's value (argparse `type=`)."""
    value = bool_of(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")
    return value
