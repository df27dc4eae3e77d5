"""`naiad serve`'s flags as a table a test can compare: every spelling, with its group,
destination, default, help, metavar, choices, whether it repeats and how a value is read."""

from __future__ import annotations

import argparse
from typing import Any


def _value_type(action: argparse.Action) -> str:
    """str, int, float, bool (tritonserver's words), or "parsed" for a flag's own parser:
    its name may change, what it accepts is tested where the flag is."""
    kind = action.type
    if kind is None or kind is str:
        return "str"
    if kind in (int, float):
        return kind.__name__
    if getattr(kind, "__name__", "") == "parse_bool":
        return "bool"
    return "parsed"


def _default(action: argparse.Action) -> Any:
    """The default as JSON has it; a repeatable flag's "no items" is [] (argparse's None or
    [] alike: neither is shown, and both read as nothing given)."""
    if isinstance(action, argparse._AppendAction) and action.default is None:
        return []
    if isinstance(action.default, tuple):
        return list(action.default)
    return action.default


def serve_flag_table(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    serve = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["serve"]
    rows = []
    for group in serve._action_groups:
        for action in group._group_actions:
            if not action.option_strings or action.dest == "help":
                continue
            rows.append(
                {
                    "flags": list(action.option_strings),
                    "group": group.title,
                    "dest": action.dest,
                    "default": _default(action),
                    "help": action.help,
                    "metavar": action.metavar,
                    "choices": list(action.choices) if action.choices else None,
                    # argparse's own actions by name; one of naiad's (its class may be renamed) as "naiad".
                    "action": type(action).__name__.lstrip("_") if type(action).__module__ == "argparse" else "naiad",
                    "required": action.required,
                    "type": _value_type(action),
                }
            )
    return rows


if __name__ == "__main__":
    # Writes the snapshot the tests compare against: run it when a flag changes on purpose.
    import json
    from pathlib import Path

    from naiad.cli import build_parser

    target = Path(__file__).with_name("serve_flags.json")
    target.write_text(json.dumps(serve_flag_table(build_parser()), indent=1) + "\n")
