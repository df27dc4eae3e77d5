"""Value parsers shared by the command-line flags."""

from __future__ import annotations

import argparse

__all__ = ["parse_bool"]


def parse_bool(text: str) -> bool:
    """tritonserver's boolean flag values: true/false, 1/0 (also yes/no, on/off)."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")
