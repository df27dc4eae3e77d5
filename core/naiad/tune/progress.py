"""The progress of a search on stderr, with an estimate of the time left: a rich progress bar
on a terminal (when rich is installed), else one line per candidate (a log, a CI job).

The estimate is the candidates still expected (brute: exact; quick: its own guess, which grows
as the search finds dimensions that keep paying) times the mean seconds of those measured so far
in this run (ones read back from the checkpoint cost nothing and are left out of the mean).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from .constraints import Constraints
from .objectives import throughput_score
from .results import CandidateResult

__all__ = ["ProgressReporter", "time_left"]


def time_left(seconds: float) -> str:
    seconds = max(0, round(seconds))
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


@dataclass(slots=True)
class ProgressReporter:
    constraints: Constraints
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    # Candidates read back from the checkpoint: they take no time.
    resumed: set[str] = field(default_factory=set)
    _spent: float = 0.0
    _timed: int = 0
    _bar: Any = None
    _task: Any = None

    def start(self, description: str) -> None:
        if not self.stream.isatty():
            return
        try:
            from rich.progress import BarColumn, Progress, TextColumn
        except ImportError:
            return
        from rich.console import Console

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} candidates"),
            TextColumn("{task.fields[left]}"),
            console=Console(file=self.stream),
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=None, left="")

    def measured(self, result: CandidateResult, done: int, expected: int) -> None:
        stored = result.candidate.key in self.resumed
        if not stored:
            self._spent += result.seconds
            self._timed += 1
        mean = self._spent / self._timed if self._timed else 0.0
        left = f"about {time_left(mean * max(0, expected - done))} left" if self._timed else ""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=max(expected, done), left=left)
            return
        score = throughput_score(result, self.constraints)
        outcome = f"{score:.1f} inf/s within the constraints" if result.loaded else "failed to load"
        if stored:
            outcome += " (from the checkpoint)"
        line = f"[{done}/~{max(expected, done)}] {result.candidate.key}: {outcome}" + (f"; {left}" if left else "")
        self.stream.write(line + "\n")
        self.stream.flush()

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
