"""The 'config' parameter of a load request (a model configuration override in its JSON form),
read alike by both protocols."""

from __future__ import annotations

import json
from typing import Any

from ..errors import NaiadError

__all__ = ["parse_config_override"]


def parse_config_override(model: str, value: Any) -> dict[str, Any]:
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
    if not isinstance(config, dict):
        raise _failed_poll(model, "the 'config' parameter must be a JSON object in the model configuration's JSON form")
    return config


def _failed_poll(model: str, reason: str) -> NaiadError:
    return NaiadError.internal(f"failed to load '{model}', failed to poll from model repository: {reason}")
