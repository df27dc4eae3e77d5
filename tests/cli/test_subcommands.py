"""`naiad`'s subcommands are the modules of `naiad.cli.commands`: a module defining COMMAND,
with its own flags, is a subcommand, with no other change."""

from __future__ import annotations

import sys

import pytest

import naiad.cli.commands
from naiad.cli import main

GREET = """
from naiad.cli.command import Command


def add_flags(parser):
    parser.add_argument("--name", default="world", help="who to greet")


def run(parser, args, argv):
    print(f"hello {args.name}")
    return 0


COMMAND = Command(name="greet", help="greet someone", description="Greets.", add_flags=add_flags, run=run)
"""


@pytest.fixture
def greet_module(tmp_path, monkeypatch):
    (tmp_path / "greet.py").write_text(GREET)
    monkeypatch.setattr(naiad.cli.commands, "__path__", [*naiad.cli.commands.__path__, str(tmp_path)])
    yield
    sys.modules.pop("naiad.cli.commands.greet", None)


def test_a_module_in_commands_is_a_subcommand_with_its_flags(greet_module, capsys):
    assert main(["greet", "--name", "naiad"]) == 0
    assert capsys.readouterr().out == "hello naiad\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "serve" in listing and "greet someone" in listing


def test_a_module_without_a_command_is_refused_naming_it(tmp_path, monkeypatch):
    (tmp_path / "notes.py").write_text("TEXT = 'not a command'\n")
    monkeypatch.setattr(naiad.cli.commands, "__path__", [*naiad.cli.commands.__path__, str(tmp_path)])
    try:
        with pytest.raises(TypeError, match=r"naiad.cli.commands.notes defines no COMMAND"):
            main(["serve", "--help"])
    finally:
        sys.modules.pop("naiad.cli.commands.notes", None)
