"""A py-spy profile of one process during a benchmark row, summarised as the frames that were
running (self time): where a server process's CPU goes, when a run cannot be repeated (the
GPU machine, lent for minutes). With `gil`, only the samples of the thread holding the
interpreter lock count: what the process's other threads wait behind. Needs the `py-spy`
command; without it there is no profile."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

__all__ = ["Recording", "top_frames"]


class Recording:
    """py-spy sampling `pid` for `seconds` into `path` (collapsed stacks, one per line)."""

    def __init__(self, pid: int, seconds: float, path: Path, gil: bool = False) -> None:
        self.path = path
        spy = shutil.which("py-spy")
        self._process = (
            subprocess.Popen(
                [spy, "record", "--nonblocking", "--rate", "100", "--duration", str(max(1, int(seconds))),
                 "--format", "raw", "--output", str(path), "--pid", str(pid), *(["--gil"] if gil else [])],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if spy and pid
            else None
        )  # fmt: skip

    def finish(self, count: int = 12) -> list[tuple[str, float]]:
        """The `count` frames with most samples, each with its share of all samples."""
        if self._process is None:
            return []
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return []
        return top_frames(self.path, count) if self.path.exists() else []


def top_frames(path: Path, count: int) -> list[tuple[str, float]]:
    samples: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, number = line.rpartition(" ")
        if stack and number.isdigit():
            samples[stack.rpartition(";")[2]] += int(number)
    total = sum(samples.values())
    return [(frame, n / total) for frame, n in samples.most_common(count)] if total else []
