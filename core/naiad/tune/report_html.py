"""report.html: one self-contained page (no scripts, no files beside it, nothing fetched) with
the same tables as report.md and plots drawn by matplotlib as inline SVG: every measured step
as throughput against p99 with the Pareto front and the budget, the best in-budget throughput
of each candidate in the order the search measured them, and the memory of each candidate.

matplotlib is the optional extra `naiad[tune]`; without it the page says how to get the plots
and keeps its tables.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from typing import Any

from .objectives import throughput_score
from .report import CANDIDATE_HEADERS, PARETO_HEADERS, candidate_rows, choice_line, pareto_rows, settings_lines
from .tune_record import TuneRecord

__all__ = ["html_report", "plots_available"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f1f3f5; } tr.best td { background: #e6f4ea; } tr.failed td { color: #a33; }
pre { background: #f6f8fa; padding: 0.8em; font-size: 0.85em; overflow-x: auto; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; } .plots figure { margin: 0; }
.note { color: #666; }
"""


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    # The XML prologue and DOCTYPE are for a file of its own, not for SVG inside HTML.
    return text[text.index("<svg") :]


def _plots(record: TuneRecord) -> list[tuple[str, str]]:
    """(caption, inline SVG) per plot."""
    # Figure without pyplot: no global state, no GUI backend, no display needed.
    from matplotlib.figure import Figure

    plots = []
    loaded = [r for r in record.results if r.loaded]
    figure = Figure(figsize=(5.4, 3.6))
    axes = figure.add_subplot()
    steps = [s for r in loaded for s in r.steps if s.errors == 0]
    axes.scatter([s.throughput for s in steps], [s.p99_ms for s in steps], s=14, color="#9aa5b1", label="a step")
    front = record.pareto
    axes.plot(
        [c.step.throughput for c in front],
        [c.step.p99_ms for c in front],
        "o-",
        color="#1f6feb",
        markersize=5,
        label="Pareto front",
    )
    budget = record.constraints.latency_budget_ms
    if budget is not None:
        axes.axhline(budget, color="#d73a49", linestyle="--", linewidth=1, label=f"p99 budget {budget:g} ms")
    best = record.best_throughput
    if best is not None:
        axes.scatter([best.step.throughput], [best.step.p99_ms], s=120, marker="*", color="#2da44e", zorder=5)
        axes.annotate(
            "best throughput", (best.step.throughput, best.step.p99_ms), xytext=(6, 6), textcoords="offset points"
        )
    axes.set_xlabel("throughput (inferences/s)")
    axes.set_ylabel("p99 latency (ms)")
    axes.set_yscale("log")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    plots.append(("Every measured step: throughput against p99 (log scale)", _svg(figure)))

    figure = Figure(figsize=(5.4, 3.6))
    axes = figure.add_subplot()
    numbers = list(range(1, len(record.results) + 1))
    scores = [throughput_score(r, record.constraints) for r in record.results]
    colours = [
        "#2da44e" if best is not None and r is best.result else "#1f6feb" if r.loaded else "#d73a49"
        for r in record.results
    ]
    axes.bar(numbers, scores, color=colours)
    axes.set_xlabel("candidate, in the order measured (red: failed to load)")
    axes.set_ylabel("best throughput within the budget (inf/s)")
    axes.grid(True, axis="y", alpha=0.3)
    plots.append(("The search's path: each candidate's score", _svg(figure)))

    if any(r.memory_mb is not None for r in record.results):
        figure = Figure(figsize=(5.4, 3.6))
        axes = figure.add_subplot()
        axes.bar(numbers, [r.memory_mb or 0.0 for r in record.results], color="#8250df")
        ceiling = record.constraints.max_memory_mb
        if ceiling is not None:
            axes.axhline(ceiling, color="#d73a49", linestyle="--", linewidth=1, label=f"ceiling {ceiling:g} MiB")
            axes.legend(fontsize=8)
        axes.set_xlabel("candidate, in the order measured")
        axes.set_ylabel("server memory, PSS (MiB)")
        axes.grid(True, axis="y", alpha=0.3)
        plots.append(("Memory per candidate (proportional set size of the server's processes)", _svg(figure)))
    return plots


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for index, row in enumerate(rows):
        css = f' class="{classes[index]}"' if index < len(classes) and classes[index] else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def html_report(record: TuneRecord, configs: dict[str, str]) -> str:
    """`configs`: the best config.pbtxt's text per objective ("throughput", "latency"). The
    page reads top down as a person looks: the answers, the plots, the tables, the files."""
    escape = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>naiad tune: {escape(record.model)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>naiad tune: {escape(record.model)}</h1>",
        "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in settings_lines(record)) + "</ul>",
        "<h2>Best configuration per objective</h2>",
    ]
    answers = [
        (title, choice_line(choice).replace("`", ""))
        for title, choice in (
            ("best throughput within the p99 budget", record.best_throughput),
            ("best p99 at the throughput floor", record.best_latency),
        )
    ]
    parts.append(_table(("objective", "answer"), answers))
    parts.append("<h2>Plots</h2>")
    if plots_available():
        parts.append('<div class="plots">')
        for caption, svg in _plots(record):
            parts.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
        parts.append("</div>")
    else:
        parts.append('<p class="note">Plots need matplotlib: pip install "naiad[tune]".</p>')
    parts.append("<h2>Pareto front: throughput against p99</h2>")
    parts.append(_table(PARETO_HEADERS, pareto_rows(record.pareto)))
    parts.append("<h2>Every candidate, in the order measured</h2>")
    best = record.best_throughput
    classes = [
        "best" if best is not None and r is best.result else "" if r.loaded else "failed" for r in record.results
    ]
    parts.append(_table(CANDIDATE_HEADERS, candidate_rows(record), classes))
    parts.append("<h2>The configurations written</h2>")
    for objective, text in configs.items():
        parts.append(f"<details><summary>{escape(objective)}/config.pbtxt</summary><pre>{escape(text)}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
