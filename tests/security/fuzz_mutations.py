"""Hypothesis strategies that turn valid documents and messages into the malformed ones a
careless or hostile client sends: structure-aware mutations (a field deleted, duplicated,
given another type, a huge number, a negative dimension, NaN, odd unicode, deep nesting) and
raw byte mutations of what goes on the wire.

Documents are plain Python values, serialized by `dumps`, which also writes what `json`
cannot: `Raw` text spliced in verbatim (NaN, a 100000-deep list) and `Pairs` (an object
with a duplicate key)."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "Raw",
    "Pairs",
    "dumps",
    "json_values",
    "texts",
    "mutate_document",
    "mutate_bytes",
    "huge_numbers",
]


@dataclass(frozen=True)
class Raw:
    """JSON text written as it is."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object written from its (key, value) pairs: keys may repeat."""

    items: tuple[tuple[str, Any], ...]


def dumps(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{_string(k)}:{dumps(v)}" for k, v in value.items) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    return str(value)


def _string(text: str) -> str:
    # ensure_ascii=False keeps lone surrogates as they are; `encode` then writes them with
    # surrogatepass, which is invalid UTF-8 on the wire.
    return json.dumps(text, ensure_ascii=False)


def encode(document: Any) -> bytes:
    return dumps(document).encode("utf-8", "surrogatepass")


# -- values -----------------------------------------------------------------------------

huge_numbers = st.sampled_from(
    [
        -1,
        -(2**31),
        2**31,
        2**32,
        2**53 + 1,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63) - 1,
        10**30,
        -(10**30),
        1e308,
        -1e308,
        1e-320,
        0.5,
        -0.0,
        float("nan"),
        float("inf"),
        float("-inf"),
    ]
)

texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "\ud800",
            "💥" * 40,
            "\u202eRTL",
            "../../etc/passwd",
            "/",
            "%s%n{0}",
            "a" * 5000,
            "FP32",
            "BYTES",
            "INPUT0",
            "binary_data_size",
            "shared_memory_region",
            "null",
            "1",
            "-1",
        ]
    ),
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    huge_numbers,
)

json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(texts, children, max_size=4),
    ),
    max_leaves=10,
)


def _deep(depth: int, kind: str) -> Raw:
    if kind == "list":
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * depth + "1" + "}" * depth)


def _long_list(count: int) -> Raw:
    return Raw("[" + ",".join(["0"] * count) + "]")


# -- structure-aware mutations ---------------------------------------------------------

Path = tuple[Any, ...]


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a document (the root included), depth first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _get(document: Any, path: Path) -> Any:
    for step in path:
        document = document[step]
    return document


def _set(document: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _delete(document: Any, path: Path) -> Any:
    if not path:
        return document
    parent = _get(document, path[:-1])
    del parent[path[-1]]
    return document


def _duplicate(document: Any, path: Path) -> Any:
    if not path:
        return document
    parent = _get(document, path[:-1])
    key = path[-1]
    if isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
        return document
    # A duplicate key: the object becomes Pairs, its key written twice (the second value
    # another one, so which one wins matters).
    items = list(parent.items())
    items.append((key, copy.deepcopy(parent[key])))
    return _set(document, path[:-1], Pairs(tuple(items)))


def _swap_type(value: Any) -> list[Any]:
    """Values of other JSON types than `value`'s, that a confused client might send."""
    options: list[Any] = [None, True, [value], {"value": value}]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        options += [str(value), float(value) + 0.5]
    elif isinstance(value, str):
        options += [len(value), [value, value]]
    elif isinstance(value, list):
        options += [len(value), "" if not value else value[0], [value]]
    elif isinstance(value, dict):
        options += [list(value), list(value.values())]
    return options


MUTATIONS = (
    "delete",
    "duplicate",
    "replace",
    "swap_type",
    "huge_number",
    "negative",
    "nan",
    "unicode",
    "deep_nesting",
    "long_list",
    "empty",
    "add_key",
)


@st.composite
def mutate_document(draw: st.DrawFn, document: Any, max_mutations: int = 3) -> tuple[Any, list[str]]:
    """`document` after 0..max_mutations mutations; also returns what was done (for the
    failure report: hypothesis prints the drawn values too)."""
    document = copy.deepcopy(document)
    done: list[str] = []
    for _ in range(draw(st.integers(0, max_mutations))):
        if isinstance(document, (Raw, Pairs)):
            break
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        target = _get(document, path)
        if isinstance(target, (Raw, Pairs)):
            continue
        kind = draw(st.sampled_from(MUTATIONS))
        done.append(f"{kind} at {list(path)}")
        if kind == "delete":
            document = _delete(document, path)
        elif kind == "duplicate":
            document = _duplicate(document, path)
        elif kind == "replace":
            document = _set(document, path, draw(json_values))
        elif kind == "swap_type":
            document = _set(document, path, draw(st.sampled_from(_swap_type(target))))
        elif kind == "huge_number":
            document = _set(document, path, draw(huge_numbers))
        elif kind == "negative":
            document = _set(document, path, draw(st.sampled_from([-1, -2, -(2**31), -(2**63)])))
        elif kind == "nan":
            document = _set(document, path, Raw(draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]))))
        elif kind == "unicode":
            document = _set(document, path, draw(texts))
        elif kind == "deep_nesting":
            depth = draw(st.sampled_from([64, 1000, 1025, 20000]))
            document = _set(document, path, _deep(depth, draw(st.sampled_from(["list", "object"]))))
        elif kind == "long_list":
            document = _set(document, path, _long_list(draw(st.sampled_from([1000, 100000]))))
        elif kind == "empty":
            document = _set(document, path, draw(st.sampled_from([[], {}, ""])))
        elif kind == "add_key" and isinstance(target, dict):
            target[draw(texts)] = draw(json_values)
    return document, done


# -- byte mutations ---------------------------------------------------------------------

BYTE_MUTATIONS = ("flip", "insert", "delete", "truncate", "overwrite")


@st.composite
def mutate_bytes(draw: st.DrawFn, data: bytes, max_mutations: int = 4) -> bytes:
    """`data` with 1..max_mutations byte-level changes at places hypothesis picks."""
    buffer = bytearray(data)
    for _ in range(draw(st.integers(1, max_mutations))):
        kind = draw(st.sampled_from(BYTE_MUTATIONS))
        at = draw(st.integers(0, max(len(buffer) - 1, 0)))
        if kind == "flip" and buffer:
            buffer[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            buffer[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and buffer:
            del buffer[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del buffer[at:]
        elif kind == "overwrite" and buffer:
            chunk = draw(st.binary(min_size=1, max_size=4))
            buffer[at : at + len(chunk)] = chunk
    return bytes(buffer)
