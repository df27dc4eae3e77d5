"""A strict reader of Prometheus text for the tests: every sample by exact name and labels."""

from __future__ import annotations

import re

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> tuple[dict[tuple[str, frozenset], float], dict[str, str]]:
    """(samples by (name, labels), family types by name)."""
    samples: dict[tuple[str, frozenset], float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"malformed sample line: {line!r}"
        name, labels, value = match.groups()
        key = (name, frozenset(LABEL.findall(labels or "")))
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(value)
    return samples, types


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]
