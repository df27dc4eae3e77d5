"""One candidate, end to end: the server it needs (tune's own, restarted when `workers`
changes, or the one the user runs), the model loaded with its configuration, the concurrency
sweep, the server's memory, the seconds it all took."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..protos import model_config_pb2 as pb
from .candidate_config import apply_candidate
from .concurrency_sweep import concurrency_sweep
from .measuring import MeasureAt, step_from
from .memory import tree_pss_mb
from .reloading import Reloader, RepositoryClient
from .results import CandidateResult, Step
from .server_launch import LaunchError, ServerLauncher
from .space import Candidate

__all__ = ["CandidateRunner", "ServerTarget"]


@dataclass(slots=True)
class ServerTarget:
    """Where candidates run: tune's own server (`launcher`), else the user's at `url` (with its
    process id, for memory, when given)."""

    url: str = ""
    pid: int | None = None
    launcher: ServerLauncher | None = None
    default_workers: int = 1

    def server_for(self, candidate: Candidate) -> tuple[str, int | None]:
        """The URL of the server that runs `candidate` and its process id (None: unknown)."""
        if self.launcher is None:
            return self.url, self.pid
        workers = candidate.get("workers", self.default_workers) or self.default_workers
        server = self.launcher.ensure(workers)
        return server.http_url, server.pid


@dataclass(slots=True)
class CandidateRunner:
    model: str
    base: pb.ModelConfig
    target: ServerTarget
    client_for: Callable[[str], RepositoryClient]
    measure: MeasureAt
    max_concurrency: int
    latency_budget_ms: float | None = None

    async def __call__(self, candidate: Candidate) -> CandidateResult:
        start = time.monotonic()
        try:
            url, pid = self.target.server_for(candidate)
        except LaunchError as exc:
            return CandidateResult(candidate, False, f"naiad serve did not start: {exc}", seconds=_since(start))
        reloader = Reloader(self.client_for(url), self.model)
        outcome = reloader.load(apply_candidate(self.base, candidate))
        if not outcome.loaded:
            return CandidateResult(candidate, False, outcome.message, seconds=_since(start))

        async def measure_at(concurrency: int) -> Step:
            return step_from(concurrency, await self.measure(url, concurrency))

        try:
            steps = await concurrency_sweep(
                measure_at, max_concurrency=self.max_concurrency, latency_budget_ms=self.latency_budget_ms
            )
        except Exception as exc:
            # A candidate that loads but cannot be measured (the server died under load, say)
            # is recorded as such; the search goes on with the next one.
            return CandidateResult(candidate, False, f"measuring failed: {exc}", seconds=_since(start))
        memory = None if pid is None else tree_pss_mb(pid)
        return CandidateResult(candidate, True, steps=steps, memory_mb=memory, seconds=_since(start))


def _since(start: float) -> float:
    return round(time.monotonic() - start, 3)
