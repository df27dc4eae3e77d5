"""`Finding`: one problem `naiad check` found in a model repository, with where it is and
what to do about it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Finding", "Severity"]

# "error": the model would fail to load; "warning": it loads, perhaps not as meant.
Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    """`repository` is the repository as the command line named it; `file` is relative to
    it (`model/config.pbtxt`, `model/1/model.onnx`; "" for the repository itself); `line`
    and `column` count from 1, None where the problem has no place in a text file (a
    missing file, a directory). `model` is "" for a problem of the repository itself."""

    severity: Severity
    model: str
    repository: str
    file: str
    line: int | None
    column: int | None
    message: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        """The finding as `--format json` writes it (docs/check.md's schema)."""
        return {
            "severity": self.severity,
            "model": self.model,
            "repository": self.repository,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "fix": self.fix,
        }

    @property
    def path(self) -> str:
        """The file as a path from where the command ran (the repository joined to `file`)."""
        if not self.file:
            return self.repository
        return self.repository.rstrip("/") + "/" + self.file
