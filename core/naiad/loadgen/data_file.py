"""`read_data_file`: perf_analyzer's JSON input data file (`--input-data FILE.json`).

`{"data": [STEP, ...]}`, each STEP an object mapping an input's name to its values: a list
(nested or flat), `{"content": [...], "shape": [...]}`, or `{"b64": "...", "shape": [...]}`
(raw bytes). A STEP may also be a list of such objects (one stream of a sequence); streams
are sent one after the other.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from .load_error import LoadError

__all__ = ["FileTensor", "read_data_file"]


@dataclass(frozen=True, slots=True)
class FileTensor:
    # Flat or nested values; None when the tensor came as raw bytes.
    content: Any
    raw: bytes | None
    shape: tuple[int, ...] | None


def read_data_file(path: str) -> list[dict[str, FileTensor]]:
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except FileNotFoundError:
        raise LoadError(f"--input-data {path}: no such file (expected random, zero or a JSON data file)") from None
    except OSError as exc:
        raise LoadError(f"--input-data {path}: cannot read it: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LoadError(f"--input-data {path}: not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise LoadError(f'--input-data {path}: expected an object with a "data" list, as perf_analyzer reads')
    steps: list[dict[str, FileTensor]] = []
    for index, entry in enumerate(document["data"]):
        for step in entry if isinstance(entry, list) else [entry]:
            if not isinstance(step, dict):
                raise LoadError(f"--input-data {path}: data entry {index} is not an object of inputs")
            steps.append({name: _tensor(path, index, name, value) for name, value in step.items()})
    if not steps:
        raise LoadError(f'--input-data {path}: the "data" list is empty')
    return steps


def _tensor(path: str, index: int, name: str, value: Any) -> FileTensor:
    where = f"--input-data {path}: data entry {index}, input '{name}'"
    if isinstance(value, list):
        return FileTensor(value, None, None)
    if not isinstance(value, dict):
        raise LoadError(f'{where}: expected a list of values, or an object with "content" or "b64"')
    shape = value.get("shape")
    if shape is not None and not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise LoadError(f'{where}: "shape" must be a list of whole numbers')
    dims = None if shape is None else tuple(shape)
    content = value.get("content")
    if isinstance(content, dict) and "b64" in content:
        value = content
    if "b64" in value:
        try:
            return FileTensor(None, base64.b64decode(value["b64"], validate=True), dims)
        except (binascii.Error, TypeError, ValueError):
            raise LoadError(f'{where}: "b64" is not base64 text') from None
    if not isinstance(content, list):
        raise LoadError(f'{where}: expected "content" to be a list of values')
    return FileTensor(content, None, dims)
