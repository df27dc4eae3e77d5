"""Model repository requests (index, load, unload) as both protocols read them, once their
wire form is decoded into plain values: the checks and Triton's wording live here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import NaiadError, shown

__all__ = [
    "FILE_PREFIX",
    "IndexRequest",
    "LoadRequest",
    "UnloadRequest",
    "index_request",
    "load_request",
    "unload_request",
    "parse_config_override",
]

# A load parameter with this prefix carries one model file: `file:<path in the model directory>`.
FILE_PREFIX = "file:"


@dataclass(frozen=True, slots=True)
class IndexRequest:
    ready: bool  # only the models that are ready


@dataclass(frozen=True, slots=True)
class LoadRequest:
    model: str
    config: dict[str, Any] | None  # an override in the model configuration's JSON form
    files: Mapping[str, bytes]  # model files to load from, by path


@dataclass(frozen=True, slots=True)
class UnloadRequest:
    model: str
    unload_dependents: bool


def index_request(ready: object = False) -> IndexRequest:
    if not isinstance(ready, bool):
        raise NaiadError.invalid(f"'ready' must be true or false, got {shown(ready)}")
    return IndexRequest(ready)


def load_request(model: str, parameters: Mapping[str, object]) -> LoadRequest:
    """`parameters`: `config` (JSON text, or HTTP's decoded JSON) and `file:<path>` bytes."""
    files: dict[str, bytes] = {}
    for key, value in parameters.items():
        if key.startswith(FILE_PREFIX):
            if not isinstance(value, bytes):
                raise NaiadError.invalid(f"failed to load '{model}': parameter '{key}' must carry the file as bytes")
            files[key.removeprefix(FILE_PREFIX)] = value
    config = parse_config_override(model, parameters["config"]) if "config" in parameters else None
    return LoadRequest(model, config, files)


def unload_request(model: str, parameters: Mapping[str, object]) -> UnloadRequest:
    dependents = parameters.get("unload_dependents", False)
    if not isinstance(dependents, bool):
        raise NaiadError.invalid("'unload_dependents' of the unload request must be true or false")
    return UnloadRequest(model, dependents)


def parse_config_override(model: str, value: object) -> dict[str, Any]:
    """The override `value` holds: a JSON text, or (naiad's HTTP only) the decoded JSON itself.
    One that is not a JSON object fails as Triton's load does (INTERNAL, "failed to load
    '<model>', failed to poll from model repository"), which clients match on, with the reason
    after it."""
    config = value
    if isinstance(value, (str, bytes)):
        try:
            config = json.loads(value)
        except ValueError as exc:
            raise _failed_poll(model, f"the 'config' parameter is not valid JSON: {exc}") from None
        except RecursionError:
            # json's decoder recurses once per level: a text nested deeper than the stack is
            # as unusable as one that does not parse.
            raise _failed_poll(model, "the 'config' parameter is not valid JSON: it is nested too deeply") from None
    if not isinstance(config, dict):
        raise _failed_poll(model, "the 'config' parameter must be a JSON object in the model configuration's JSON form")
    return config


def _failed_poll(model: str, reason: str) -> NaiadError:
    return NaiadError.internal(f"failed to load '{model}', failed to poll from model repository: {reason}")
