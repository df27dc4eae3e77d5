"""`naiad perf -m MODEL ...`: measure a model's throughput and latency on a running server
(naiad or Triton), in perf_analyzer's vocabulary; the engine is `naiad.loadgen`."""

from __future__ import annotations

import argparse
import asyncio
import sys

import uvloop

from ...loadgen import LoadError, StepResult
from ...loadgen.csv_report import write_csv_report
from ...loadgen.load_session import LoadSession
from ...loadgen.measure import measure_in_session
from ..command import Command
from ..flags import add_option_flags, options_from_flags
from ..perf_flags import PerfFlags, Steps
from ..perf_report import step_text, summary_table
from ..progress_bar import MeasureProgress

__all__ = ["COMMAND"]


def add_flags(parser: argparse.ArgumentParser) -> None:
    add_option_flags(parser.add_argument_group("load"), PerfFlags)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    flags = options_from_flags(PerfFlags, args)
    try:
        steps = uvloop.run(_measure_all(flags))
    except LoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(summary_table(steps))
    if flags.latency_report_file:
        try:
            write_csv_report(flags.latency_report_file, steps, flags.percentile)
        except OSError as exc:
            print(f"error: -f {flags.latency_report_file}: cannot write it: {exc.strerror}", file=sys.stderr)
            return 1
    return 0


async def _measure_all(flags: PerfFlags) -> list[StepResult]:
    spec = flags.load_spec()
    settings = flags.settings()
    plan: Steps = flags.steps()
    loads: list[tuple[int | None, float | None]] = [(c, None) for c in plan.concurrencies] + [
        (None, r) for r in plan.request_rates
    ]
    session = await LoadSession.open(spec)
    print(f"*** naiad perf: model {spec.model} at {session.target} over {spec.protocol} ***", flush=True)
    results = []
    try:
        with MeasureProgress(len(loads)) as progress:
            for index, (concurrency, rate) in enumerate(loads):
                label = f"concurrency {concurrency}" if concurrency is not None else f"{rate:g} requests/s"
                progress.step(index, label, settings.max_trials)
                step = await measure_in_session(
                    session, concurrency=concurrency, request_rate=rate, settings=settings, on_window=progress.window
                )
                print(step_text(step), flush=True)
                results.append(step)
    finally:
        await asyncio.shield(session.close())
    return results


COMMAND = Command(
    name="perf",
    help="measure a model's throughput and latency on a running server (perf_analyzer's flags)",
    description=(
        "Load a model on a running server (naiad or Triton, over KServe v2 HTTP/REST or gRPC) at each "
        "concurrency (or request rate) of a range, as perf_analyzer does, and print per step the "
        "throughput, latency percentiles, the server's time per phase (statistics extension) and "
        "the client's own CPU use. See docs/perf.md."
    ),
    add_flags=add_flags,
    run=run,
    order=30,
)
