"""`naiad`'s entry point: the subcommands of `naiad.cli.commands`, and tritonserver's launch
line (flags alone mean `serve`)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from ..version import __version__
from ..workers import is_worker, worker_0
from ..workers.linux_process import end_with_parent
from . import commands as commands_package
from .command import Command

__all__ = ["build_parser", "main", "subcommands"]


def subcommands() -> list[Command]:
    """Every module of `naiad.cli.commands`' COMMAND, in --help order."""
    found = []
    for module in pkgutil.iter_modules(commands_package.__path__):
        command = getattr(importlib.import_module(f"{commands_package.__name__}.{module.name}"), "COMMAND", None)
        if not isinstance(command, Command):
            raise TypeError(f"naiad.cli.commands.{module.name} defines no COMMAND (a naiad.cli.command.Command)")
        found.append(command)
    return sorted(found, key=lambda c: (c.order, c.name))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="naiad", description="naiad: an inference server that speaks Triton's interfaces."
    )
    parser.add_argument("--version", action="version", version=f"naiad {__version__}")
    parsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in subcommands():
        command.add_flags(parsers.add_parser(command.name, help=command.help, description=command.description))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if is_worker():
        # Never outlive worker 0, in whatever state this process is when it goes.
        end_with_parent(worker_0())
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0].startswith("--") and arguments[0] not in ("--help", "--version"):
        # A tritonserver launch line with `naiad` for `tritonserver`: flags alone mean serve.
        arguments.insert(0, "serve")
    args = parser.parse_args(arguments)
    command = next((c for c in subcommands() if c.name == args.command), None)
    if command is None:
        parser.print_help()
        return 2
    return command.run(parser, args, arguments)
