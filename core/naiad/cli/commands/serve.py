"""`naiad serve`: tritonserver's flags, on the in-process `Server`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from naiad_wire import busy_poll

from ...errors import NaiadError
from ...malloc_thresholds import MMAP_THRESHOLD, TRIM_THRESHOLD, raise_malloc_thresholds
from ...workers import Topology, WorkerPool, is_worker, worker_count
from ..command import Command
from ..flags import add_option_flags, argument_group, options_from_flags
from ..frontend_plugins import frontend_options, installed_frontends
from ..inert_flags import InertFlags, warn_inert_flags
from ..main import main
from ..serve_flags import SERVE_FLAG_GROUPS, SERVE_FLAG_GROUPS_AFTER_FRONTENDS, ServerFlags
from ..serve_process import ServePlan, serve
from ..server_options import options_from_args

__all__ = ["COMMAND"]

log = logging.getLogger("naiad")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "app",
        nargs="?",
        metavar="APP.py",
        help="a Python file declaring models with @naiad.model, served beside any "
        "--model-repository (docs/python-models.md)",
    )
    for title, flags in SERVE_FLAG_GROUPS:
        add_option_flags(argument_group(parser, title), flags)
    for frontend in installed_frontends():
        add_option_flags(argument_group(parser, frontend.title), frontend.options)
    for title, flags in SERVE_FLAG_GROUPS_AFTER_FRONTENDS:
        add_option_flags(argument_group(parser, title), flags)
    inert = argument_group(
        parser,
        "accepted for tritonserver compatibility",
        "parsed as tritonserver parses them; each logs why it has no effect in naiad",
    )
    add_option_flags(inert, InertFlags)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    if not args.model_repository and not args.app:
        parser.error(
            "the following arguments are required: --model-repository/--model-store (or an app file: naiad serve APP.py)"
        )
    if args.reload and not args.app:
        parser.error("--reload: it reloads an app file, and none is given (naiad serve APP.py --reload)")
    try:
        options = options_from_args(args)
    except NaiadError as exc:
        parser.error(exc.message)
    frontends = tuple(installed_frontends())
    server_flags = options_from_flags(ServerFlags, args)
    listening = frontend_options(frontends, args)
    shared_ports = [
        (listening[f.name].address, listening[f.name].port)
        for f in frontends
        if f.on_every_worker and listening[f.name].enabled and hasattr(listening[f.name], "port")
    ]
    try:
        workers = worker_count(server_flags.workers, shared_ports)
    except ValueError as exc:
        parser.error(str(exc))
    plan = ServePlan(
        options=options,
        frontends=frontends,
        # Worker 0 with others, or one of the others: every process listens on the ports.
        frontend_options=frontend_options(frontends, args, shared_ports=workers > 1 or is_worker()),
        workers=workers,
        pin_loop_threads=server_flags.pin_loop_threads,
    )
    assert options.log_settings is not None
    options.log_settings.install()
    # Before any model loads or process starts: every process of the server inherits them.
    if server_flags.raise_malloc_thresholds and raise_malloc_thresholds():
        log.debug("malloc thresholds raised: mmap %d bytes, trim %d bytes", MMAP_THRESHOLD, TRIM_THRESHOLD)
    try:
        busy_poll.configure(server_flags.busy_poll_us)
    except ValueError:
        parser.error(f"--busy-poll-us must be 0 or more, not {server_flags.busy_poll_us}")
    if not is_worker():  # worker 0 speaks for the server at start-up
        warn_inert_flags(args, log)
    runner: Callable[[Coroutine[Any, Any, int]], int] = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop  # type: ignore[import-not-found, unused-ignore]

        runner = uvloop.run
    pool = topology = None
    if workers > 1:
        # The model home loads the models while the workers start; all of them forked from
        # here, before any thread or event loop, with what they run imported already.
        for frontend in frontends:
            for module in frontend.imports:
                with contextlib.suppress(ImportError):
                    importlib.import_module(module)
        gc.freeze()  # the collector leaves the inherited objects (and their pages) alone
        topology = Topology.create(workers)
        pool = WorkerPool(argv, topology)
        pool.start(main)
    return runner(serve(plan, pool, topology))


COMMAND = Command(
    name="serve",
    help="serve the models of one or more model repositories",
    description="Serve the models of one or more model repositories over HTTP/REST and gRPC.",
    add_flags=add_flags,
    run=run,
    order=0,
)
