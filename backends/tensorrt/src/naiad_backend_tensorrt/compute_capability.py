"""`cc_model_filenames`: a model directory may hold one engine per GPU architecture
(engines only run on the compute capability they were built for)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["format_compute_capability", "select_plan_filename"]


def format_compute_capability(capability: tuple[int, int]) -> str:
    """(8, 6) -> "8.6", the form config keys use."""
    return f"{capability[0]}.{capability[1]}"


def select_plan_filename(cc_model_filenames: Mapping[str, str], capability: tuple[int, int], default: str) -> str:
    """The engine file for a GPU of `capability`: the `cc_model_filenames` entry whose key
    is that capability ("8.6", surrounding spaces ignored), else `default`."""
    wanted = format_compute_capability(capability)
    for key, filename in cc_model_filenames.items():
        if key.strip() == wanted and filename:
            return filename
    return default
