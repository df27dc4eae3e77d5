"""docs/security.md names only flags that exist, and every restricted group."""

from __future__ import annotations

import re
from pathlib import Path

from naiad.cli import build_parser
from naiad.frontends.kserve.restrictions import GROUPS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()


def test_every_flag_named_exists():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    known = {option for action in serve._actions for option in action.option_strings}
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", DOC)) - {"--shared-memory"}  # perf_analyzer's
    assert named and named <= known, sorted(named - known)


def test_every_restricted_group_is_listed():
    listed = re.search(r"The groups are the same for both protocols:(.*?);", DOC, re.S)
    assert listed is not None
    assert re.findall(r"`([a-z-]+)`", listed.group(1)) == list(GROUPS)
