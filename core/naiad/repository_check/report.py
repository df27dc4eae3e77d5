"""`naiad check`'s report: text for people (grouped by model, as a compiler prints
"file:line: error: message", each followed by its fix; coloured on a terminal) and JSON for
CI pipelines (docs/check.md gives its schema; `SCHEMA_VERSION` changes only when a field
changes meaning or goes away)."""

from __future__ import annotations

import json
from itertools import groupby

from .checker import CheckReport
from .finding import Finding

__all__ = ["SCHEMA_VERSION", "render_json", "render_text"]

SCHEMA_VERSION = 1

_RED, _YELLOW, _BOLD, _DIM, _RESET = "\033[31m", "\033[33m", "\033[1m", "\033[2m", "\033[0m"


def render_text(report: CheckReport, color: bool = False) -> str:
    """Each model's findings under its name, then one line of totals."""

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    lines = []
    for model, findings in groupby(report.findings, key=lambda f: f.model):
        lines.append(paint(_BOLD, f"model '{model}':" if model else "repository:"))
        for finding in findings:
            severity = paint(_RED if finding.severity == "error" else _YELLOW, finding.severity)
            lines.append(f"{paint(_BOLD, _place(finding))}: {severity}: {finding.message}")
            lines.append(paint(_DIM, f"  fix: {finding.fix}"))
    lines.append(_totals(report))
    return "\n".join(lines)


def _place(finding: Finding) -> str:
    place = finding.path
    if finding.line is not None:
        place += f":{finding.line}"
        if finding.column is not None:
            place += f":{finding.column}"
    return place


def _totals(report: CheckReport) -> str:
    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    failing = len({f.model for f in report.findings if f.severity == "error"})
    return (
        f"{count(report.errors, 'error')}, {count(report.warnings, 'warning')}; "
        f"{count(report.models, 'model')} checked, {failing} would fail to load"
    )


def render_json(report: CheckReport) -> str:
    """The findings and a summary, as one JSON document."""
    failing = sorted({f.model for f in report.findings if f.severity == "error" and f.model})
    document = {
        "schema_version": SCHEMA_VERSION,
        "findings": [finding.to_json() for finding in report.findings],
        "summary": {
            "errors": report.errors,
            "warnings": report.warnings,
            "models": report.models,
            "failing_models": failing,
        },
    }
    return json.dumps(document, indent=2)
