"""The inputs of `naiad infer`: each `--input NAME=FILE.npy|JSON` read into an array and
written as one input of a KServe v2 JSON request, with the datatype and rank the model's
metadata states."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..datatypes import numpy_dtype

__all__ = ["request_inputs", "split_input_flag"]


def split_input_flag(text: str) -> tuple[str, str]:
    """(NAME, VALUE) of one `--input NAME=VALUE`; ValueError naming it when malformed."""
    name, equals, value = text.partition("=")
    if not equals or not name or not value:
        raise ValueError(f"--input '{text}': expected NAME=FILE.npy or NAME=JSON (e.g. INPUT0=[1,2,3])")
    return name, value


def request_inputs(model: str, metadata: dict[str, Any], flags: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The `inputs` of a JSON inference request: each flag's value as the model's input of
    that name declares it; ValueError naming the input and what is wrong."""
    declared = {entry["name"]: entry for entry in metadata.get("inputs", [])}
    inputs = []
    for name, value in flags:
        entry = declared.get(name)
        if entry is None:
            known = ", ".join(declared) or "none"
            raise ValueError(f"model '{model}' has no input '{name}' (its inputs: {known})")
        array = _to_rank(_read_value(name, value), list(entry.get("shape", [])))
        datatype = str(entry["datatype"])
        inputs.append(
            {"name": name, "shape": list(array.shape), "datatype": datatype, "data": _json_data(name, array, datatype)}
        )
    return inputs


def _read_value(name: str, value: str) -> np.ndarray:
    """A .npy file's array, or the JSON value's."""
    if value.endswith(".npy"):
        path = Path(value)
        if not path.is_file():
            raise ValueError(f"--input {name}: no file '{value}'")
        try:
            return np.asarray(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise ValueError(f"--input {name}: '{value}' is not a readable .npy file: {exc}") from None
    try:
        return np.asarray(json.loads(value))
    except (json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"--input {name}: '{value}' is neither a .npy file nor JSON ({exc})") from None


def _to_rank(array: np.ndarray, shape: list[int]) -> np.ndarray:
    """One example for a model whose declared shape has one more (batch) dimension is a
    batch of one."""
    if array.ndim + 1 == len(shape):
        return array[np.newaxis]
    return array


def _json_data(name: str, array: np.ndarray, datatype: str) -> list[Any]:
    """The flattened values as the JSON request carries them for `datatype`."""
    flat = array.reshape(-1)
    if datatype == "BYTES":
        return [item.decode(errors="replace") if isinstance(item, bytes) else str(item) for item in flat.tolist()]
    if datatype == "BF16":
        return [float(x) for x in flat.astype(np.float32)]
    try:
        converted = flat.astype(numpy_dtype(datatype), casting="same_kind")
    except (TypeError, KeyError) as exc:
        raise ValueError(
            f"--input {name}: values of type {array.dtype} do not fit the input's datatype {datatype} ({exc})"
        ) from None
    return converted.tolist()
