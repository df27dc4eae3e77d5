"""`measure`: one load step (one concurrency, or one request rate) measured as perf_analyzer
measures it: windows of `measurement_interval_ms` until the last three agree within the
stability percentage or `max_trials` windows have passed; the step's figures are those
three windows together, with the server's breakdown over the same time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from .client_cpu import CLIENT_BOUND_FRACTION, CpuClock
from .engine import LoadEngine
from .latency_summary import latency_summary
from .load_error import LoadError
from .load_session import LoadSession
from .load_spec import LoadSpec, MeasureSettings
from .server_stats import StatsSnapshot
from .stability import STABILITY_WINDOWS, WindowFigures, is_stable
from .step_result import ClientTimes, StepResult
from .window_recorder import WindowRecorder, WindowRecords

__all__ = ["WindowReport", "measure", "measure_in_session"]


@dataclass(frozen=True, slots=True)
class WindowReport:
    """Told to `on_window` after each window: which of at most `max_trials`, and its figures."""

    trial: int
    max_trials: int
    figures: WindowFigures


@dataclass(frozen=True, slots=True)
class _Window:
    records: WindowRecords
    figures: WindowFigures
    stats_after: StatsSnapshot
    cpu_after: CpuClock


async def measure(
    spec: LoadSpec,
    *,
    concurrency: int | None = None,
    request_rate: float | None = None,
    settings: MeasureSettings = MeasureSettings(),  # noqa: B008 - frozen, shared safely
    on_window: Callable[[WindowReport], None] | None = None,
) -> StepResult:
    """Measure one step against any KServe v2 server (naiad, Triton). Exactly one of
    `concurrency` and `request_rate`. LoadError (one line) when the step cannot run."""
    session = await LoadSession.open(spec)
    try:
        return await measure_in_session(
            session, concurrency=concurrency, request_rate=request_rate, settings=settings, on_window=on_window
        )
    finally:
        await session.close()


async def measure_in_session(
    session: LoadSession,
    *,
    concurrency: int | None = None,
    request_rate: float | None = None,
    settings: MeasureSettings = MeasureSettings(),  # noqa: B008
    on_window: Callable[[WindowReport], None] | None = None,
) -> StepResult:
    """`measure` on an open session (several steps share one session's setup)."""
    _check(concurrency, request_rate, settings)
    recorder = WindowRecorder()
    sequences = session.sequences()
    engine = LoadEngine(session.open_lane, lambda: session.new_source(sequences), recorder)
    windows: list[_Window] = []
    try:
        if concurrency is not None:
            await engine.start_concurrency(concurrency)
        else:
            assert request_rate is not None
            await engine.start_rate(request_rate)
        start_stats = await _statistics(session)
        start_cpu = CpuClock.now()
        recorder.swap()  # the window starts with the statistics read
        stats_before = [start_stats]
        cpu_before = [start_cpu]
        while len(windows) < settings.max_trials:
            await asyncio.sleep(settings.measurement_interval_ms / 1000)
            engine.check()
            records = recorder.swap()
            cpu = CpuClock.now()
            stats = await _statistics(session)
            if not records.latencies_ns and records.errors:
                raise LoadError(f"every request failed: {records.first_error}")
            figures = _figures(records, session.spec.batch_size, settings.percentile)
            windows.append(_Window(records, figures, stats, cpu))
            stats_before.append(stats)
            cpu_before.append(cpu)
            if on_window is not None:
                on_window(WindowReport(len(windows), settings.max_trials, figures))
            if is_stable([w.figures for w in windows], settings.stability_percentage):
                break
    finally:
        await engine.stop()
    last = windows[-STABILITY_WINDOWS:]
    first_index = len(windows) - len(last)
    return _result(
        last,
        stats_before[first_index],
        cpu_before[first_index],
        concurrency,
        request_rate,
        session.spec.batch_size,
        settings,
        stable=is_stable([w.figures for w in windows], settings.stability_percentage),
        windows=len(windows),
    )


async def _statistics(session: LoadSession) -> StatsSnapshot:
    """The model's statistics now; empty (the server columns 0) from a KServe v2 server
    without Triton's statistics extension."""
    try:
        return StatsSnapshot.read(await session.control.model_statistics())
    except LoadError:
        if not session.has_statistics:
            return StatsSnapshot()
        raise


def _check(concurrency: int | None, request_rate: float | None, settings: MeasureSettings) -> None:
    if (concurrency is None) == (request_rate is None):
        raise ValueError("measure: give exactly one of concurrency and request_rate")
    if concurrency is not None and concurrency < 1:
        raise LoadError(f"concurrency {concurrency}: must be 1 or more")
    if request_rate is not None and request_rate <= 0:
        raise LoadError(f"request rate {request_rate:g}: must be more than 0")
    if settings.measurement_interval_ms < 1:
        raise LoadError(f"--measurement-interval {settings.measurement_interval_ms}: must be 1 ms or more")
    if settings.max_trials < 1:
        raise LoadError(f"--max-trials {settings.max_trials}: must be 1 or more")
    if settings.percentile is not None and not 1 <= settings.percentile <= 99:
        raise LoadError(f"--percentile {settings.percentile}: must be from 1 to 99")


def _figures(records: WindowRecords, batch_size: int, percentile: int | None) -> WindowFigures:
    count = len(records.latencies_ns)
    throughput = count * batch_size / records.duration_s if records.duration_s > 0 else 0.0
    summary = latency_summary(records.latencies_ns, percentile)
    key = f"p{percentile}" if percentile is not None else "avg"
    return WindowFigures(throughput, summary.get(key, 0.0))


def _result(
    last: list[_Window],
    stats_before: StatsSnapshot,
    cpu_before: CpuClock,
    concurrency: int | None,
    request_rate: float | None,
    batch_size: int,
    settings: MeasureSettings,
    *,
    stable: bool,
    windows: int,
) -> StepResult:
    """The last windows (three, or fewer when fewer ran) taken together."""
    latencies = [latency for w in last for latency in w.records.latencies_ns]
    seconds = sum(w.records.duration_s for w in last)
    requests = len(latencies)
    client_cpu = last[-1].cpu_after.fraction_since(cpu_before)
    return StepResult(
        concurrency=concurrency,
        request_rate=request_rate,
        throughput=requests * batch_size / seconds if seconds > 0 else 0.0,
        latency_us=latency_summary(latencies, settings.percentile),
        server=last[-1].stats_after.breakdown_since(stats_before),
        client_cpu=client_cpu,
        client_bound=client_cpu >= CLIENT_BOUND_FRACTION,
        stable=stable,
        errors=sum(w.records.errors for w in last),
        requests=requests,
        client=ClientTimes(
            send_us=sum(w.records.send_ns for w in last) / requests / 1000 if requests else 0.0,
            recv_us=sum(w.records.recv_ns for w in last) / requests / 1000 if requests else 0.0,
        ),
        windows=windows,
        stabilizing_latency=f"p{settings.percentile}" if settings.percentile is not None else "avg",
    )
