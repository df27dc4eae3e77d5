"""`naiad models`: the repository index of a running server (naiad or Triton), as a table."""

from __future__ import annotations

import argparse
import sys

from ..client_flags import ClientFlags
from ..command import Command
from ..flags import add_option_flags, options_from_flags
from ..kserve_client import ClientError
from ..text_table import text_table

__all__ = ["COMMAND"]


def add_flags(parser: argparse.ArgumentParser) -> None:
    add_option_flags(parser.add_argument_group("server"), ClientFlags)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    flags = options_from_flags(ClientFlags, args)
    try:
        index = flags.client().repository_index()
    except ClientError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    # A model that was never loaded has no version or state in the index: "-" says so.
    rows = [(row["name"], row.get("version") or "-", row.get("state") or "-", row.get("reason") or "") for row in index]
    print(text_table(("Name", "Version", "State", "Reason"), rows))
    return 0


COMMAND = Command(
    name="models",
    help="list the models of a running server: name, version, state, reason",
    description="Print the repository index of a running server (naiad or Triton, over KServe v2 HTTP/REST).",
    add_flags=add_flags,
    run=run,
    order=10,
)
