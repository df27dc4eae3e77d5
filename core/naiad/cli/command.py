"""`Command`: one subcommand of `naiad` (`naiad serve`, ...).

Each module of `naiad.cli.commands` defines one, as `COMMAND`, with its own flags: adding a
subcommand is adding a module there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Command"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    name: str
    # One line in `naiad --help`; `description` heads `naiad NAME --help`.
    help: str
    description: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    # (the `naiad` parser, for its error(); the parsed flags; the command line) -> exit status
    run: Callable[[argparse.ArgumentParser, argparse.Namespace, list[str]], int]
    # Listed in `naiad --help` in this order, lowest first.
    order: int = 100
