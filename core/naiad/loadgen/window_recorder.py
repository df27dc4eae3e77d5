"""`WindowRecorder`: what the requests of the current measurement window did, cheap to add
to (one list append per request) and swapped for a new one at each window's end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["WindowRecorder", "WindowRecords"]


@dataclass
class WindowRecords:
    started_ns: int
    ended_ns: int = 0
    latencies_ns: list[int] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    send_ns: int = 0
    recv_ns: int = 0

    @property
    def duration_s(self) -> float:
        return (self.ended_ns - self.started_ns) / 1e9


class WindowRecorder:
    def __init__(self) -> None:
        self.current = WindowRecords(time.perf_counter_ns())

    def succeeded(self, latency_ns: int, send_ns: int, recv_ns: int) -> None:
        records = self.current
        records.latencies_ns.append(latency_ns)
        records.send_ns += send_ns
        records.recv_ns += recv_ns

    def failed(self, message: str) -> None:
        records = self.current
        records.errors += 1
        if not records.first_error:
            records.first_error = message

    def swap(self) -> WindowRecords:
        """The window just ended; a new one starts now."""
        now = time.perf_counter_ns()
        ended, self.current = self.current, WindowRecords(now)
        ended.ended_ns = now
        return ended
