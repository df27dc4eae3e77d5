"""`naiad serve`'s flags stay as users and tritonserver launch lines know them: every flag's
spellings, group, destination, default, help, metavar, choices, action and value type match
serve_flags.json, which was taken from the command line as it was before its flags were
declared as option fields and its frontends found through entry points. A flag changed on
purpose rewrites the file (`python tests/cli/serve_flag_table.py`), and the diff shows it."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from serve_flag_table import serve_flag_table

from naiad.cli import build_parser

SNAPSHOT = Path(__file__).with_name("serve_flags.json")
OPENAI_GROUP = "OpenAI-compatible API (the naiad-openai package)"


def by_flag(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {row["flags"][0]: row for row in rows}  # type: ignore[index]


def test_serve_flags_are_those_of_the_snapshot():
    expected = json.loads(SNAPSHOT.read_text())
    if not any(e.name == "openai" for e in importlib.metadata.entry_points(group="naiad.frontends")):
        # Without naiad-openai installed its flags are not naiad's to offer.
        expected = [row for row in expected if row["group"] != OPENAI_GROUP]
    actual = json.loads(json.dumps(serve_flag_table(build_parser())))
    assert by_flag(actual) == by_flag(expected)
    # --help lists them in the same order.
    assert [row["flags"] for row in actual] == [row["flags"] for row in expected]
