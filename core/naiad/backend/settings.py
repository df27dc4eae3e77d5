"""A backend's `--backend-config NAME,KEY=VALUE` settings, typed: one frozen dataclass per
backend whose fields carry their key (`setting`), parsed once by `read_settings`.

The pattern is `naiad.frontends.options`': the field is the one place a setting's key,
default and help live. Values are text on the command line; each field's type says how it is
read (`bool` by the one rule of `naiad.flag_values`, `int`, `float`, `str`), and a value that
does not read, or falls outside `minimum`/`maximum`/`choices`, is an error naming the backend,
the key and the value, never a silent default. Keys a backend does not declare are ignored:
Triton passes global settings (`backend-directory`, ...) to every backend.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ..errors import NaiadError
from ..flag_values import BOOLEAN_WORDS, bool_of

__all__ = ["setting", "read_settings", "setting_keys", "read_bool"]

T = TypeVar("T")
S = TypeVar("S")


def setting(
    default: T,
    key: str,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
) -> T:
    """A dataclass field read from `--backend-config NAME,<key>=VALUE`; `help` is the line
    the backend's documentation gives it."""
    metadata = {"key": key, "help": help, "minimum": minimum, "maximum": maximum, "choices": choices}
    # A dataclasses.Field, typed as its value, as dataclasses.field is.
    return dataclasses.field(default=default, metadata=metadata)


def setting_keys(cls: type) -> tuple[str, ...]:
    """Every key `cls` declares, in field order."""
    return tuple(f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata)


def read_settings(cls: type[S], backend: str, config: Mapping[str, str]) -> S:
    """`cls` with each declared key that `config` sets (a blank value keeps the default).

    Raises NaiadError (INVALID_ARG) as `--backend-config <backend>,<key>: <fault>, got '<value>'`.
    """
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = field.metadata.get("key")
        text = config.get(key) if key is not None else None
        if text is None or not text.strip():
            continue
        try:
            values[field.name] = _value(hints[field.name], text.strip(), field.metadata)
        except ValueError as exc:
            raise NaiadError.invalid(f"--backend-config {backend},{key}: {exc}, got '{text}'") from None
    return cls(**values)


def read_bool(text: str, what: str) -> bool:
    """`text` as a boolean by the one rule of every setting; ValueError naming `what` (the
    setting, e.g. a config parameter read outside `ModelConfig`) and the value otherwise."""
    value = bool_of(text)
    if value is None:
        raise ValueError(f"{what}: expected {BOOLEAN_WORDS}, got '{text}'")
    return value


def _value(kind: Any, text: str, metadata: Mapping[str, Any]) -> Any:
    value: Any
    if kind is bool:
        value = bool_of(text)
        if value is None:
            raise ValueError(f"expected {BOOLEAN_WORDS}")
        return value
    if kind is int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
    elif kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    elif kind is str:
        choices = metadata["choices"]
        if choices and text.lower() not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text.lower() if choices else text
    else:  # a programming error of the backend, not the user's
        raise TypeError(f"backend setting of unsupported type {kind!r}")
    minimum, maximum = metadata["minimum"], metadata["maximum"]
    if minimum is not None and value < minimum:
        raise ValueError(f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"must be at most {maximum}")
    return value
