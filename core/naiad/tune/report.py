"""report.md: what `naiad tune` searched, what it found per objective, the Pareto front of
throughput against p99, and every candidate with its memory, in Markdown tables. The rows are
built here once and the HTML page (report_html.py) lays out the same rows."""

from __future__ import annotations

from collections.abc import Sequence

from .objectives import Choice, throughput_score
from .results import CandidateResult
from .tune_record import TuneRecord

__all__ = [
    "CANDIDATE_HEADERS",
    "PARETO_HEADERS",
    "candidate_rows",
    "markdown_report",
    "memory_text",
    "pareto_rows",
    "settings_lines",
]

CANDIDATE_HEADERS = (
    "#",
    "candidate",
    "loaded",
    "best in budget (inf/s)",
    "p99 there (ms)",
    "at concurrency",
    "memory (MiB)",
    "seconds",
    "note",
)
PARETO_HEADERS = ("throughput (inf/s)", "p99 (ms)", "concurrency", "candidate")


def memory_text(result: CandidateResult) -> str:
    return "n/a" if result.memory_mb is None else f"{result.memory_mb:.0f}"


def settings_lines(record: TuneRecord) -> list[str]:
    """The run's settings, one `name: value` per line."""
    constraints = record.constraints

    def limit(value: float | None, unit: str) -> str:
        return "none" if value is None else f"{value:g} {unit}"

    return [
        f"model: {record.model}",
        f"server: {record.server}",
        f"search: {record.search}, {len(record.results)} candidates "
        f"({record.resumed} from the checkpoint), {record.seconds:.1f} s",
        f"measurement: {record.measurement}",
        f"p99 budget: {limit(constraints.latency_budget_ms, 'ms')}; "
        f"throughput floor: {limit(constraints.min_throughput, 'inferences/s')}; "
        f"memory ceiling: {limit(constraints.max_memory_mb, 'MiB')}",
        *(f"dimension {line}" for line in record.space.describe()),
    ]


def candidate_rows(record: TuneRecord) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for number, result in enumerate(record.results, start=1):
        score = throughput_score(result, record.constraints)
        steps = [s for s in result.steps if record.constraints.within_budget(s)]
        best = max(steps, key=lambda s: s.throughput, default=None) if score else None
        note = result.message if not result.loaded else "; ".join(record.constraints.violations(result))
        rows.append(
            (
                str(number),
                result.candidate.key,
                "yes" if result.loaded else "no",
                f"{score:.1f}" if best else "-",
                f"{best.p99_ms:.2f}" if best else "-",
                str(best.concurrency) if best else "-",
                memory_text(result),
                f"{result.seconds:.1f}",
                note.replace("\n", " "),
            )
        )
    return rows


def pareto_rows(front: Sequence[Choice]) -> list[tuple[str, ...]]:
    return [
        (f"{c.step.throughput:.1f}", f"{c.step.p99_ms:.2f}", str(c.step.concurrency), c.result.candidate.key)
        for c in front
    ]


def choice_line(choice: Choice | None) -> str:
    if choice is None:
        return "no candidate met the constraints"
    step = choice.step
    return (
        f"`{choice.result.candidate.key}`: {step.throughput:.1f} inferences/s, p99 {step.p99_ms:.2f} ms "
        f"at concurrency {step.concurrency}, memory {memory_text(choice.result)} MiB"
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [line(headers), "|" + "|".join(" --- " for _ in headers) + "|", *(line(row) for row in rows)]


def markdown_report(record: TuneRecord, configs: dict[str, str]) -> str:
    """`configs`: the best config.pbtxt's text per objective ("throughput", "latency")."""
    lines = [f"# naiad tune: {record.model}", ""]
    lines += [f"- {line}" for line in settings_lines(record)]
    lines += ["", "## Best configuration per objective", ""]
    for objective, title, choice in (
        ("throughput", "Best throughput within the p99 budget", record.best_throughput),
        ("latency", "Best p99 at the throughput floor", record.best_latency),
    ):
        lines += [f"### {title}", "", choice_line(choice), ""]
        if objective in configs:
            lines += [f"`{objective}/config.pbtxt`:", "", "```", configs[objective].rstrip("\n"), "```", ""]
    lines += ["## Pareto front: throughput against p99", ""]
    lines += _table(PARETO_HEADERS, pareto_rows(record.pareto))
    lines += ["", "## Every candidate, in the order measured", ""]
    lines += _table(CANDIDATE_HEADERS, candidate_rows(record))
    return "\n".join(lines) + "\n"
