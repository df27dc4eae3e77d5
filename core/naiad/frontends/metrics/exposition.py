"""Prometheus text exposition (format 0.0.4), written by hand.

prometheus_client's writer appends `_total` to every counter's name; Triton's families
(`nv_inference_request_success`, ...) have no such suffix and dashboards query them by
their exact names, so naiad writes the text itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Family", "render", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Family:
    """One metric family: `samples` are (name suffix, labels, value)."""

    name: str
    help: str
    type: str  # counter | gauge | summary | histogram
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, value: float, labels: Labels = (), suffix: str = "") -> None:
        self.samples.append((suffix, labels, value))


def render(families: Iterable[Family]) -> bytes:
    out: list[str] = []
    for family in families:
        out.append(f"# HELP {family.name} {_escape_help(family.help)}\n")
        out.append(f"# TYPE {family.name} {family.type}\n")
        for suffix, labels, value in family.samples:
            if labels:
                text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels)
                out.append(f"{family.name}{suffix}{{{text}}} {_value(value)}\n")
            else:
                out.append(f"{family.name}{suffix} {_value(value)}\n")
    return "".join(out).encode("utf-8")


def _value(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def bound_label(bound: float) -> str:
    """A bucket bound or quantile as Prometheus clients write it (`0.5`, `100.0`, `+Inf`)."""
    if math.isinf(bound):
        return "+Inf"
    return repr(float(bound))
