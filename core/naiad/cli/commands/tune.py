"""`naiad tune MODEL`: search a model's instance count, batching, queue delay, framework
threads and naiad's workers for the best configuration under a p99 budget (naiad.tune does the
work; this module reads the flags and prints the summary)."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ...loadgen import MeasureSettings
from ...option_fields import option
from ...tune.checkpoint import CheckpointError
from ...tune.constraints import Constraints
from ...tune.model_space import parse_values
from ...tune.server_launch import LaunchError
from ...tune.tuning import TuneOutput, TuneSettings, run_tune
from ..client_flags import ClientFlags
from ..command import Command
from ..flags import add_option_flags, options_from_flags
from ..kserve_client import ClientError, KServeClient, base_url
from ..text_table import text_table

__all__ = ["COMMAND"]


def _values(text: str) -> str:
    # argparse passes the default ("": not asked) through here too.
    if text:
        parse_values(text)  # raises ValueError naming what is wrong
    return text


def _shape(text: str) -> str:
    name, _, dims = text.partition(":")
    if not name or not dims:
        raise ValueError(f"--shape '{text}': expected NAME:DIMS, e.g. INPUT0:3,224,224")
    parse_values(dims)
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerChoice:
    model_repository: str = option(
        "",
        "--model-repository",
        "a model repository: tune starts `naiad serve` on it itself, on free 127.0.0.1 ports in explicit "
        "mode, and may search --workers. Without it tune uses the server at --url (naiad, or Triton started "
        "with --model-control-mode=explicit)",
        metavar="DIR",
    )
    server_pid: int | None = option(
        None,
        "--server-pid",
        "the process id of the server at --url, for its memory (proportional set size of its process tree); "
        "without it memory is n/a for a server tune did not start",
        metavar="PID",
    )
    serve_flags: str = option(
        "", "--serve-flags", "more flags for the `naiad serve` tune starts, as one string", metavar="'FLAGS'"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchFlags:
    search: str = option(
        "quick",
        "--search",
        "quick: grow each dimension while it pays, then hill-climb from the best point; brute: every point",
        choices=("quick", "brute"),
    )
    instances: str = option(
        "",
        "--instances",
        "instance counts to try (default 1, 2, ... up to twice the CPUs)",
        metavar="N,N,...",
        parse=_values,
    )
    max_batch_sizes: str = option(
        "",
        "--max-batch-sizes",
        "max_batch_size values to try (default 1, 4, 16, ... up to the model's own)",
        metavar="N,N,...",
        parse=_values,
    )
    preferred_batch_sizes: str = option(
        "",
        "--preferred-batch-sizes",
        "dynamic_batching preferred batch sizes to try, 0 for none (default: the model's own, not searched)",
        metavar="N,N,...",
        parse=_values,
    )
    queue_delays_us: str = option(
        "",
        "--queue-delays-us",
        "max_queue_delay_microseconds values to try (default 0, 100, 1000)",
        metavar="US,US,...",
        parse=_values,
    )
    intra_op_threads: str = option(
        "",
        "--intra-op-threads",
        "intra-op thread counts to try, 0 for the framework's choice (ONNX Runtime and PyTorch models; default "
        "1, 2, ... up to the CPUs)",
        metavar="N,N,...",
        parse=_values,
    )
    inter_op_threads: str = option(
        "",
        "--inter-op-threads",
        "inter-op thread counts to try, 0 for the framework's choice (default: the model's own, not searched)",
        metavar="N,N,...",
        parse=_values,
    )
    workers: str = option(
        "",
        "--workers",
        "`naiad serve --workers` values to try (only with --model-repository; default 1, not searched)",
        metavar="N,N,...",
        parse=_values,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintFlags:
    latency_budget_ms: float | None = option(
        None, "--latency-budget-ms", "the p99 latency budget: steps above it do not count", metavar="MS"
    )
    min_throughput: float | None = option(
        None, "--min-throughput", "the throughput floor (inferences/s) of the latency objective", metavar="N"
    )
    max_memory_mb: float | None = option(
        None, "--max-memory-mb", "the memory ceiling (MiB of the server's proportional set size)", metavar="MIB"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureFlags:
    max_concurrency: int = option(32, "--max-concurrency", "the highest concurrency a sweep reaches", metavar="N")
    measurement_interval: int = option(
        1000, "--measurement-interval", "milliseconds of one measurement window", metavar="MS"
    )
    stability_percentage: float = option(
        10.0,
        "--stability-percentage",
        "windows agree within this percentage to be stable",
        aliases=("-s",),
        metavar="PCT",
    )
    max_trials: int = option(5, "--max-trials", "windows per step at most, stable or not", metavar="N")
    shape: tuple[str, ...] = option(
        (), "--shape", "the shape of an input with variable dimensions (repeatable)", metavar="NAME:DIMS", parse=_shape
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFlags:
    output_dir: str = option(
        "tune-results",
        "--output-dir",
        "where the best config.pbtxt per objective, report.md and report.html go",
        aliases=("-o",),
        metavar="DIR",
    )
    checkpoint: str = option(
        "",
        "--checkpoint",
        "a JSON-lines file of every measured candidate: a search run again with it resumes without measuring "
        "what it holds",
        metavar="FILE",
    )


_DIMENSION_FLAGS = {
    "instances": "instances",
    "max_batch_size": "max_batch_sizes",
    "preferred_batch_size": "preferred_batch_sizes",
    "max_queue_delay_us": "queue_delays_us",
    "intra_op_threads": "intra_op_threads",
    "inter_op_threads": "inter_op_threads",
    "workers": "workers",
}


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="the model to tune")
    add_option_flags(parser.add_argument_group("server"), ServerChoice)
    add_option_flags(parser.add_argument_group("server"), ClientFlags)
    add_option_flags(parser.add_argument_group("search space"), SearchFlags)
    add_option_flags(parser.add_argument_group("constraints"), ConstraintFlags)
    add_option_flags(parser.add_argument_group("measurement"), MeasureFlags)
    add_option_flags(parser.add_argument_group("output"), OutputFlags)


def _settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[TuneSettings, ClientFlags]:
    server = options_from_flags(ServerChoice, args)
    client = options_from_flags(ClientFlags, args)
    search = options_from_flags(SearchFlags, args)
    limits = options_from_flags(ConstraintFlags, args)
    measured = options_from_flags(MeasureFlags, args)
    output = options_from_flags(OutputFlags, args)
    asked = {d: parse_values(getattr(search, f)) for d, f in _DIMENSION_FLAGS.items() if getattr(search, f)}
    try:
        constraints = Constraints(limits.latency_budget_ms, limits.min_throughput, limits.max_memory_mb)
    except ValueError as exc:
        parser.error(str(exc))
    if measured.max_concurrency < 1:
        parser.error(f"--max-concurrency must be at least 1, got {measured.max_concurrency}")
    if measured.measurement_interval < 1 or measured.max_trials < 1:
        parser.error("--measurement-interval and --max-trials must be at least 1")
    repository = Path(server.model_repository) if server.model_repository else None
    if repository is not None and not repository.is_dir():
        parser.error(f"--model-repository '{repository}' is not a directory")
    shapes = {}
    for text in measured.shape:
        name, _, dims = text.partition(":")
        shapes[name] = parse_values(dims)
    settings = TuneSettings(
        model=args.model,
        output=Path(output.output_dir),
        repository=repository,
        url=client.url,
        server_pid=server.server_pid,
        search=search.search,
        asked=asked,
        constraints=constraints,
        max_concurrency=measured.max_concurrency,
        measure_settings=MeasureSettings(
            measurement_interval_ms=measured.measurement_interval,
            stability_percentage=measured.stability_percentage,
            max_trials=measured.max_trials,
        ),
        shapes=shapes,
        checkpoint=Path(output.checkpoint) if output.checkpoint else None,
        serve_flags=tuple(shlex.split(server.serve_flags)),
    )
    return settings, client


def _summary(out: TuneOutput) -> str:
    record = out.record
    lines = [
        f"naiad tune {record.model}: {record.search} search, {len(record.results)} candidates "
        f"({len(record.failed)} failed to load, {record.resumed} from the checkpoint) in {record.seconds:.1f} s",
    ]
    rows = []
    for objective, choice in (("throughput", record.best_throughput), ("latency", record.best_latency)):
        if choice is None:
            rows.append((objective, "-", "-", "-", "-", "no candidate met the constraints"))
            continue
        step = choice.step
        rows.append(
            (
                objective,
                f"{step.throughput:.1f}",
                f"{step.p99_ms:.2f}",
                str(step.concurrency),
                str(out.written[objective]),
                choice.result.candidate.key,
            )
        )
    lines.append(text_table(("Objective", "Inferences/s", "p99 ms", "Concurrency", "Config", "Candidate"), rows))
    lines.append(f"report: {out.report_md} and {out.report_html}")
    return "\n".join(lines)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    settings, client = _settings(parser, args)

    def client_for(url: str) -> KServeClient:
        return KServeClient(base_url(url), client.timeout)

    try:
        out = asyncio.run(run_tune(settings, client_for))
    except (ClientError, CheckpointError, LaunchError, ValueError) as exc:
        print(f"error: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        where = f"; run again with --checkpoint {settings.checkpoint} to resume" if settings.checkpoint else ""
        print(f"interrupted{where}", file=sys.stderr)
        return 130
    print(_summary(out))
    return 0


COMMAND = Command(
    name="tune",
    help="search a model's configuration for the best throughput under a p99 budget",
    description=(
        "Search instance count, max_batch_size, preferred batch sizes, the queue delay, the framework's "
        "threads and naiad's --workers for MODEL, measuring each candidate with naiad perf's engine, under "
        "the constraints given. Each candidate is loaded through the repository API's config override (the "
        "model's files are never edited). Writes the best config.pbtxt per objective, report.md and "
        "report.html to --output-dir and prints a summary."
    ),
    add_flags=add_flags,
    run=run,
    order=40,
)
