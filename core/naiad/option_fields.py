"""`option`: a dataclass field that also declares its command-line flag.

Every flag of `naiad serve` is a field of some options class (the frontends' in
`frontends/options.py`, the server's in `naiad.cli`), so a flag's name, default, help and
value parser are written once, beside the value a program receives. `naiad.cli` turns these
fields into argparse flags and back into the options objects; an application that embeds a
part of naiad constructs the same classes directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any, TypeVar

__all__ = ["option"]

T = TypeVar("T")


def option(
    default: T,
    flag: str,
    help: str,
    *,
    metavar: str | None = None,
    choices: tuple[str, ...] = (),
    shown: str | None = None,
    parse: Callable[[str], Any] | None = None,
    aliases: tuple[str, ...] = (),
    required: bool = False,
    dest: str | None = None,
    item_spellings: tuple[tuple[str, str], ...] = (),
    switch: bool = False,
) -> T:
    """A field with its command-line flag.

    `shown`: how help states the default where the value itself would not say it (None: the
    value, or nothing when it is None or empty). `parse`: reads one value from its text and
    raises ValueError (or argparse.ArgumentTypeError) naming what is wrong; without it the
    field's type reads it. `aliases`: other spellings of the same flag (tritonserver's older
    names). `dest`: the attribute argparse stores it under (default: the flag's name).
    `item_spellings`: for a repeatable flag of KEY=VALUE items, (flag, KEY) pairs of
    deprecated flags that each add one `KEY=VALUE` item to it. `switch`: a bool flag that
    takes no value (present: True)."""
    metadata = {
        "flag": flag,
        "help": help,
        "metavar": metavar,
        "choices": choices,
        "shown": shown,
        "parse": parse,
        "aliases": aliases,
        "required": required,
        "dest": dest,
        "item_spellings": item_spellings,
        "switch": switch,
    }
    # A dataclasses.Field, typed as its value, as dataclasses.field is. A tuple default is
    # immutable, so it is safe to share.
    return field(default=default, metadata=metadata)
