"""Refusing a JSON body that names one key twice.

orjson keeps the last of duplicate keys without a word; Triton's parser refuses such a
generate body, and a client that sends one has a bug whichever value it meant. The check
parses again with the standard library, which reports every object's pairs: it runs only
where Triton refuses (generate bodies), not on the infer path.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import NaiadError

__all__ = ["check_unique_keys"]


def check_unique_keys(body: bytes, what: str) -> None:
    """Raise INVALID_ARG naming the first key an object of `body` (valid JSON) repeats."""

    def unique(pairs: list[tuple[str, Any]]) -> None:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise NaiadError.invalid(f"duplicate key '{key}' in {what}")
            seen.add(key)

    json.loads(body, object_pairs_hook=unique)
