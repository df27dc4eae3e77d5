"""`MeasureProgress`: a progress bar on stderr while `naiad perf` measures (rich, when it is
installed and stderr is a terminal; nothing otherwise, so logs and pipes stay clean)."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from ..loadgen import WindowReport

__all__ = ["MeasureProgress"]


class MeasureProgress:
    def __init__(self, total_steps: int) -> None:
        self._progress: Any = None
        self._task: Any = None
        self._total_steps = total_steps
        if not sys.stderr.isatty():
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:  # rich is optional (naiad[perf]): no bar without it
            return
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            # On one terminal, what the command prints goes through the bar's console so the
            # bar stays below it; printed to a file or a pipe, it must stay on stdout.
            redirect_stdout=sys.stdout.isatty(),
            redirect_stderr=False,
        )

    def __enter__(self) -> MeasureProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def step(self, index: int, label: str, max_trials: int) -> None:
        """A new step starts: a bar of its windows."""
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.remove_task(self._task)
        description = f"step {index + 1}/{self._total_steps} {label}"
        self._task = self._progress.add_task(description, total=max_trials, figures="")

    def window(self, report: WindowReport) -> None:
        if self._progress is None or self._task is None:
            return
        figures = f"{report.figures.throughput:.1f} infer/s, {report.figures.latency_us:.0f} us"
        self._progress.update(self._task, completed=report.trial, figures=f"window {report.trial}: {figures}")
