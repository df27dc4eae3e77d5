"""One run of `naiad tune`, start to end: the server (started here when given a repository),
the model's base configuration, the space, the search (resumed from the checkpoint), the best
config.pbtxt per objective and the reports in the output directory. A server the user runs is
left as tune found it: the model loaded again with the configuration it had, or unloaded when
it was not loaded before, never serving a candidate's configuration."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config.model_config import ConfigError, parse_config_text
from ..loadgen import LoadSpec, MeasureSettings, measure
from ..protos import model_config_pb2 as pb
from .best_configs import write_best_configs
from .candidate_runner import CandidateRunner, ServerTarget
from .checkpoint import Checkpoint
from .constraints import Constraints
from .measuring import LoadResult
from .model_space import model_space
from .progress import ProgressReporter
from .reloading import Reloader, RepositoryClient
from .report import markdown_report
from .report_html import html_report
from .results import CandidateResult
from .search import Evaluations, brute_search, quick_search
from .server_launch import ServerLauncher
from .space import Candidate
from .tune_record import TuneRecord

__all__ = ["TuneSettings", "TuneOutput", "run_tune"]


@dataclass(frozen=True, slots=True)
class TuneSettings:
    model: str
    output: Path
    # A repository: tune starts `naiad serve` on it. None: the server at `url` (explicit mode).
    repository: Path | None = None
    url: str = "localhost:8000"
    server_pid: int | None = None
    search: str = "quick"  # quick | brute
    asked: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    constraints: Constraints = field(default_factory=Constraints)
    max_concurrency: int = 32
    measure_settings: MeasureSettings = field(default_factory=MeasureSettings)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    checkpoint: Path | None = None
    serve_flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TuneOutput:
    record: TuneRecord
    written: dict[str, Path]  # the best config.pbtxt per objective
    report_md: Path
    report_html: Path


def _user_config(settings: TuneSettings) -> pb.ModelConfig | None:
    """The user's config.pbtxt, as the base of the files tune writes (so they differ from it
    only where tune changed something); None without a repository or a file."""
    if settings.repository is None:
        return None
    path = settings.repository / settings.model / "config.pbtxt"
    if not path.is_file():
        return None
    try:
        return parse_config_text(path.read_text(), settings.model)
    except ConfigError:
        return None


def _measurement(settings: TuneSettings) -> str:
    m = settings.measure_settings
    return (
        f"naiad perf's engine over HTTP, windows of {m.measurement_interval_ms} ms, stable within "
        f"{m.stability_percentage:g}% (at most {m.max_trials} windows), concurrency 1, 2, 4, ... up to "
        f"{settings.max_concurrency} until two doublings add no throughput or p99 leaves the budget"
    )


async def run_tune(settings: TuneSettings, client_for: Callable[[str], RepositoryClient]) -> TuneOutput:
    started = time.monotonic()
    launcher = None
    if settings.repository is not None:
        launcher = ServerLauncher(settings.repository, settings.serve_flags, client_for)
    default_workers = settings.asked.get("workers", (1,))[0]
    target = ServerTarget(settings.url, settings.server_pid, launcher, default_workers)
    checkpoint = Checkpoint(settings.checkpoint, settings.model) if settings.checkpoint else None
    progress = ProgressReporter(settings.constraints)
    # None until the server has been asked: a model it never had is left alone.
    was_loaded: bool | None = None
    try:
        url, _ = target.server_for(Candidate(()))
        base, was_loaded = Reloader(client_for(url), settings.model).base_config()
        space = model_space(base, settings.asked, launched=launcher is not None)

        async def measure_at(url: str, concurrency: int) -> LoadResult:
            spec = LoadSpec(url=url, model=settings.model, shapes=dict(settings.shapes))
            return await measure(spec, concurrency=concurrency, settings=settings.measure_settings)

        runner = CandidateRunner(
            settings.model,
            base,
            target,
            client_for,
            measure_at,
            settings.max_concurrency,
            settings.constraints.latency_budget_ms,
        )
        previous = checkpoint.read(space.names) if checkpoint else []
        progress.resumed = {r.candidate.key for r in previous}

        async def evaluate(candidate: Candidate) -> CandidateResult:
            result = await runner(candidate)
            if checkpoint is not None:
                checkpoint.append(result)
            return result

        evaluations = Evaluations(evaluate, settings.constraints, progress)
        # Read back, not measured again: the search walks the same path and finds them known.
        evaluations.stored.update({r.candidate.key: r for r in previous if space.valid(r.candidate)})
        progress.start(f"tuning {settings.model} ({settings.search})")
        try:
            search = brute_search if settings.search == "brute" else quick_search
            results = await search(space, evaluations)
        finally:
            progress.stop()
            if checkpoint is not None:
                checkpoint.close()
    finally:
        if launcher is not None:
            launcher.stop()
        elif was_loaded is not None:
            Reloader(client_for(settings.url), settings.model).restore(base, was_loaded)
    record = TuneRecord(
        model=settings.model,
        server="naiad serve started by tune" if launcher else settings.url,
        search=settings.search,
        space=space,
        constraints=settings.constraints,
        results=tuple(results),
        seconds=time.monotonic() - started,
        measurement=_measurement(settings),
        resumed=sum(1 for r in results if r.candidate.key in progress.resumed),
    )
    return write_outputs(record, _user_config(settings) or base, settings.output)


def write_outputs(record: TuneRecord, base: pb.ModelConfig, output: Path) -> TuneOutput:
    output.mkdir(parents=True, exist_ok=True)
    written = write_best_configs(record, base, output)
    configs = {objective: path.read_text() for objective, path in written.items()}
    report_md = output / "report.md"
    report_md.write_text(markdown_report(record, configs))
    report_page = output / "report.html"
    report_page.write_text(html_report(record, configs))
    (output / "tune.json").write_text(json.dumps(record.to_json(), indent=2) + "\n")
    return TuneOutput(record, written, report_md, report_page)
