"""`naiad check`: lint a model repository offline, as a load would check each model, and
report every problem with its file, line and fix (naiad.repository_check; docs/check.md)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass

from ...models.backend_registry import BackendRegistry
from ...option_fields import option
from ...repository_check import check_repositories, render_json, render_text
from ..command import Command
from ..flags import add_option_flags, options_from_flags
from ..serve_flags import backend_setting, config_name

__all__ = ["COMMAND"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFlags:
    model_repository: tuple[str, ...] = option(
        (),
        "--model-repository",
        "a model repository directory (or s3://, gs://, as:// URL) to check; repeat for several",
        aliases=("--model-store",),
        metavar="PATH",
    )
    format: str = option(
        "text",
        "--format",
        "text: findings grouped by model, as a compiler prints them; json: one document for CI (docs/check.md)",
        choices=("text", "json"),
    )
    model_config_name: str = option(
        "",
        "--model-config-name",
        "check each model's configs/NAME.pbtxt where it has one, else its config.pbtxt (as naiad serve loads them)",
        metavar="NAME",
        parse=config_name,
    )
    disable_auto_complete_config: bool = option(
        False,
        "--disable-auto-complete-config",
        "check as naiad serve --disable-auto-complete-config loads: configs must list inputs and outputs",
        switch=True,
        shown="",
    )
    backend_config: tuple[tuple[str, str, str], ...] = option(
        (),
        "--backend-config",
        "a backend setting naiad serve will be given (auto-complete reads some, e.g. "
        "onnxruntime,default-max-batch-size=8); repeatable",
        metavar="BACKEND,KEY=VALUE",
        parse=backend_setting,
    )


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "repositories", nargs="*", metavar="REPOSITORY", help="a model repository to check (as --model-repository)"
    )
    add_option_flags(parser.add_argument_group("check"), CheckFlags)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    flags = options_from_flags(CheckFlags, args)
    locations = [*args.repositories, *flags.model_repository]
    if not locations:
        parser.error("naiad check: name a model repository (naiad check PATH, or --model-repository PATH)")
    settings: dict[str, dict[str, str]] = {}
    for backend, key, value in flags.backend_config:
        settings.setdefault(backend, {})[key] = value
    # Backends log what a load would log; the report says it once, as findings.
    logging.getLogger("naiad").addHandler(logging.NullHandler())
    logging.getLogger("naiad").propagate = False
    registry = BackendRegistry(settings)
    try:
        report = check_repositories(
            locations, flags.model_config_name, registry, auto_complete=not flags.disable_auto_complete_config
        )
    finally:
        registry.finalize()
    if flags.format == "json":
        print(render_json(report))
    else:
        print(render_text(report, color=sys.stdout.isatty() and "NO_COLOR" not in os.environ))
    return 1 if report.errors else 0


COMMAND = Command(
    name="check",
    help="lint a model repository offline: every config and model file, with the line and a fix",
    description=(
        "Check every model of a model repository as naiad serve would load it, without serving: config.pbtxt "
        "(syntax, fields, values), each installed backend's auto-complete against the model files, and "
        "ensembles. Exit status 1 when a model would fail to load, 0 otherwise (warnings included)."
    ),
    add_flags=add_flags,
    run=run,
    order=30,
)
