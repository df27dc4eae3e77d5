"""Command-line flags from options classes: the one way `naiad` declares a flag.

An options class is a dataclass whose fields are `naiad.option_fields.option` fields; each
such field becomes one flag (with its default, help, value parser and choices), and
`options_from_flags` builds the class back from the parsed command line. Fields without a
flag are left at their defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..flag_values import parse_bool

__all__ = ["add_option_flags", "argument_group", "flag_dest", "flag_fields", "options_from_flags"]

Options = TypeVar("Options")


def flag_fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    """The fields of an options class that are flags."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("flag")]


def flag_dest(field: dataclasses.Field[Any]) -> str:
    """The attribute argparse stores a field's flag under: `--http-port` -> http_port."""
    dest: str | None = field.metadata["dest"] if "dest" in field.metadata else None
    return dest or str(field.metadata["flag"]).removeprefix("--").replace("-", "_")


def argument_group(
    parser: argparse.ArgumentParser, title: str, description: str | None = None
) -> argparse._ArgumentGroup:
    """The parser's group with this title, made when it has none yet (several options
    classes may fill one group of --help)."""
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title, description)


def add_option_flags(group: argparse._ArgumentGroup, cls: type[Any]) -> None:
    """One flag per flag field of `cls`, with the field's default, help and parser."""
    hints = typing.get_type_hints(cls)
    for field in flag_fields(cls):
        meta: Mapping[str, Any] = field.metadata
        kwargs = _flag_arguments(field, _value_type(hints[field.name]))
        group.add_argument(meta["flag"], *meta.get("aliases", ()), **kwargs)
        for spelling, key in meta.get("item_spellings", ()):
            group.add_argument(
                spelling,
                dest=kwargs["dest"],
                action=_AppendItem,
                key=key,
                metavar="VALUE",
                help=f"deprecated spelling of {meta['flag']} {key}=VALUE",
            )


def _flag_arguments(field: dataclasses.Field[Any], kind: type) -> dict[str, Any]:
    """argparse's add_argument keywords for one field whose value type is `kind`."""
    meta = field.metadata
    kwargs: dict[str, Any] = {
        "dest": flag_dest(field),
        "default": field.default,
        "help": help_text(meta["help"], field.default, meta.get("shown")),
    }
    parse: Callable[[str], Any] | None = meta.get("parse")
    if meta.get("switch"):
        kwargs["action"] = "store_true"  # no value to read
    else:
        if kind is tuple:
            kwargs.update(action="append", default=[])
        if parse is not None:
            kwargs["type"] = _reading(parse)
        elif kind is bool:
            kwargs.update(type=parse_bool, metavar="BOOL")
        elif kind not in (str, tuple):
            kwargs["type"] = kind
    if meta.get("metavar"):
        kwargs["metavar"] = meta["metavar"]
    if meta.get("choices"):
        kwargs["choices"] = meta["choices"]
    if meta.get("required"):
        kwargs["required"] = True
        del kwargs["default"]
    return kwargs


def options_from_flags(cls: type[Options], args: argparse.Namespace) -> Options:
    """An options object from the flags `add_option_flags` made for `cls`; a repeated flag's
    list becomes a tuple."""
    values: dict[str, Any] = {}
    for field in flag_fields(cls):
        value = getattr(args, flag_dest(field))
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def help_text(text: str, default: object, shown: str | None = None) -> str:
    """`text (default D)`: D is `shown`, else the default as a flag spells it (none when
    None or empty, or when `shown` is "": the text says it)."""
    if shown == "":
        return text
    if shown is None:
        if default is None or default == () or default == "":
            return text
        shown = (
            str(default).lower()
            if isinstance(default, bool)
            else f"{default:g}"
            if isinstance(default, float)
            else str(default)
        )
    return f"{text} (default {shown})"


def _value_type(hint: object) -> type:
    """The value type of a field's annotation (`int | None` -> int, `tuple[str, ...]` -> tuple)."""
    if isinstance(hint, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    origin = typing.get_origin(hint)
    result = origin if origin is not None else hint
    assert isinstance(result, type)
    return result


def _reading(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """argparse shows an ArgumentTypeError's text, and only "invalid value" for a ValueError:
    a parser's ValueError names what is wrong, so it is passed on as the former."""

    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    read.__name__ = getattr(parse, "__name__", "read")
    return read


class _AppendItem(argparse.Action):
    """A deprecated flag that adds one KEY=VALUE item to a repeatable flag (tritonserver's
    --trace-file PATH is --trace-config triton,file=PATH)."""

    def __init__(self, option_strings: list[str], dest: str, key: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.key = key

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        getattr(namespace, self.dest).append(f"{self.key}={values}")
