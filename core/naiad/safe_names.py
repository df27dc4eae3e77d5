"""The one place that checks names a client sends before they can reach the file system.

A client names models (load requests over HTTP and gRPC), files inside an uploaded model
(`file:1/model.onnx` load parameters), files a model's configuration points at (a load's
config override can set `default_model_filename` and `label_filename`) and POSIX
shared-memory objects (system shared-memory registration). None of them may become a path
by joining strings unchecked: each is checked here to be what it claims to be (one path
segment, or a relative path that stays inside its directory) and refused with Triton's
message otherwise. Messages quote only what the client sent, never a server path.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from naiad_wire.interprocess.shm_ring import SEGMENT_PREFIX

from .errors import NaiadError

__all__ = ["RESERVED_SHM_PREFIXES", "check_model_name", "check_model_file", "inside_directory", "check_shm_key"]

# Shared-memory objects the server creates for itself: Triton's Python-backend prefix
# (refused as Triton refuses it) and the files naiad's processes spill large tensors into
# when a shared-memory ring between them is full, which hold other clients' tensors.
RESERVED_SHM_PREFIXES = ("triton_python_backend_shm_region_", SEGMENT_PREFIX)

_WHITESPACE = " \t\n\r\f\v"


def _is_one_segment(text: str) -> bool:
    """A single file-name component: no separator, not `.` or `..`, no NUL (which the OS
    would cut the name at)."""
    return bool(text) and "/" not in text and "\0" not in text and text not in (".", "..")


def check_model_name(name: str) -> str:
    """A model name that is to be loaded: not blank, and one path segment once trimmed,
    as Triton's model repository manager requires. Returns the name unchanged."""
    trimmed = name.strip(_WHITESPACE)
    if not trimmed:
        raise NaiadError.invalid("Model name cannot be empty. Please enter a valid name to deploy.")
    if not _is_one_segment(trimmed):
        raise NaiadError.invalid(f"invalid model name '{name}', model name must not contain path traversal characters")
    return name


def inside_directory(relative: str) -> PurePosixPath | None:
    """`relative` as a path that stays inside the directory it is joined to, or None: every
    component must be one segment, so it can neither climb out nor start at the root."""
    parts = relative.split("/")
    return PurePosixPath(*parts) if all(_is_one_segment(part) for part in parts) else None


def check_model_file(model: str, parameter: str) -> PurePosixPath:
    """The relative path a `file:<path>` load parameter names inside the model directory
    (`file:1/model.onnx` -> `1/model.onnx`)."""
    relative = inside_directory(parameter.removeprefix("file:"))
    if relative is None:
        raise NaiadError.invalid(
            f"Invalid file parameter '{parameter}' must stay within model directory "
            f"(loading model '{model}': the path must be relative, without '.' or '..' components)"
        )
    return relative


def check_shm_key(region: str, key: str) -> str:
    """The name of the POSIX shared-memory object `key` names (leading slashes dropped, as
    shm_open does). Refuses a key that is only slashes, one that names anything but a single
    object (a '/' after the leading ones, `.`, `..`), and the server's own objects."""
    name = key.lstrip("/")
    if not _is_one_segment(name):
        raise NaiadError.invalid(
            f"cannot register shared memory region '{region}' - invalid shm key '{key}'"
            + ("" if not name else ": a key names one POSIX shared-memory object, like '/input0'")
        )
    for prefix in RESERVED_SHM_PREFIXES:
        if name.startswith(prefix):
            raise NaiadError.invalid(
                f"cannot register shared memory region '{region}' with key '{key}' as the key contains "
                f"the reserved prefix '{prefix}'"
            )
    return name
