"""`--checkpoint FILE`: every measured candidate appended as one JSON line the moment it is
measured, so a search that was interrupted (Ctrl-C, a crash, a machine gone) resumes from the
file without measuring anything twice.

The first line names the model; a file of another model's search is refused rather than mixed
in. A line cut short by an interruption is ignored (that candidate is measured again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .results import CandidateResult

__all__ = ["Checkpoint", "CheckpointError"]

_FORMAT = "naiad-tune-checkpoint/1"


class CheckpointError(Exception):
    pass


@dataclass(slots=True)
class Checkpoint:
    path: Path
    model: str
    _file: IO[str] | None = None

    def read(self, order: tuple[str, ...]) -> list[CandidateResult]:
        """The candidates a previous run measured in this space (those of other dimensions
        left out); nothing when the file does not exist yet."""
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        if not lines:
            return []
        try:
            header = json.loads(lines[0])
        except ValueError:
            raise CheckpointError(f"{self.path}: the first line is not a naiad tune checkpoint header") from None
        if not isinstance(header, dict) or header.get("format") != _FORMAT:
            raise CheckpointError(f"{self.path} is not a naiad tune checkpoint (no '{_FORMAT}' header)")
        if header.get("model") != self.model:
            raise CheckpointError(
                f"{self.path} holds the search of model '{header.get('model')}', not '{self.model}': "
                "name another file to tune this model"
            )
        found = []
        for line in lines[1:]:
            try:
                data = json.loads(line)
            except ValueError:
                continue  # a line being written when a run stopped
            if sorted(data.get("candidate", {})) == sorted(order):
                found.append(CandidateResult.from_json(data, order))
        return found

    def append(self, result: CandidateResult) -> None:
        if self._file is None:
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a")
            if fresh:
                self._file.write(json.dumps({"format": _FORMAT, "model": self.model}) + "\n")
            elif not self.path.read_text().endswith("\n"):
                # A line cut short: start the next one on a line of its own.
                self._file.write("\n")
        self._file.write(json.dumps(result.to_json()) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
