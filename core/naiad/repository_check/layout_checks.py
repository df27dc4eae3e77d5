"""The checks of a model directory's layout: directories that look like versions but are
not read as such, model files beside config.pbtxt, which versions a load would build."""

from __future__ import annotations

import re

from ..config.model_config import FILENAME_TO_BACKEND
from ..errors import NaiadError
from ..models.building import misplaced_model_file, refuse_misplaced_model_file
from ..protos import model_config_pb2 as pb
from ..repository.local import select_versions
from .checked_model import CheckedModel

__all__ = ["check_version_directories", "check_misplaced_model_file", "check_versions"]

_DIGITS = re.compile(r"\d+")


def check_version_directories(model: CheckedModel) -> None:
    """Warn of a directory a load skips (only positive numbers without a leading zero
    are versions) that looks meant as one: its name holds a number, or a model file."""
    versions = {str(v) for v in model.source.versions()}
    for entry in sorted(model.source.path.iterdir()):
        if not entry.is_dir() or entry.name in versions or entry.name.startswith((".", "__")):
            continue
        number = _DIGITS.search(entry.name)
        holds_model = any((entry / name).exists() for name in FILENAME_TO_BACKEND)
        if number is None and not holds_model:
            continue
        target = str(int(number.group())) if number is not None and int(number.group()) > 0 else "1"
        model.report(
            "warning",
            f"directory '{entry.name}' is not a version directory: versions are directories named by a positive "
            "number without leading zeros (1, 2, ...), so a load ignores it",
            f"rename it to {target}/",
            file=f"{model.name}/{entry.name}/",
        )


def check_misplaced_model_file(model: CheckedModel, proto: pb.ModelConfig) -> None:
    """A model file beside config.pbtxt instead of in a version directory."""
    misplaced = misplaced_model_file(model.source, proto)
    if misplaced is None:
        return
    try:
        refuse_misplaced_model_file(model.source, proto, model.source.versions())
    except NaiadError as exc:
        version = max(model.source.versions(), default=1)
        model.report("error", exc.message, f"move it into {version}/", file=f"{model.name}/{misplaced}")


def check_versions(model: CheckedModel, proto: pb.ModelConfig) -> None:
    """The versions a load builds under the config's version_policy; none is an error."""
    try:
        model.versions = select_versions(proto.version_policy, model.source.versions(), model.name)
    except NaiadError as exc:
        if proto.version_policy.HasField("specific"):
            model.report(
                "error",
                exc.message,
                "list only versions that have a directory, or add the missing directories",
                field="version_policy",
            )
        else:
            filename = proto.default_model_filename or "the model file"
            model.report(
                "error",
                exc.message,
                f"put {filename} in a version directory: {model.name}/1/",
                file=f"{model.name}/",
            )
