"""The checkout's installable distributions: the core and every directory with its own
pyproject.toml (the backends, and siblings such as the wire package)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def distribution_dirs() -> list[Path]:
    dirs = [
        ROOT,
        *sorted(p.parent for p in ROOT.glob("*/pyproject.toml")),
        *sorted(p.parent for p in ROOT.glob("backends/*/pyproject.toml")),
        *sorted(p.parent for p in ROOT.glob("integrations/*/pyproject.toml")),
    ]
    return dirs


def project_table(directory: Path) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text())["project"]
