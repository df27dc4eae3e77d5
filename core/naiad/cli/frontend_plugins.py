"""The frontends `naiad serve` runs: found through the `naiad.frontends` entry points, their
options read from the command line, started one after the other."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..frontends.frontend import ENTRY_POINT_GROUP, Frontend
from ..server import Server
from .flags import options_from_flags

__all__ = ["frontend_options", "installed_frontends", "start_frontends"]

log = logging.getLogger("naiad")


def installed_frontends() -> list[Frontend[Any]]:
    """Every installed frontend, in start order. One whose entry point cannot be loaded is
    left out with a warning naming it: the others still serve."""
    found: dict[str, Frontend[Any]] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in found:
            continue  # one distribution seen twice on the path (an editable install)
        try:
            frontend = entry.load()
        except Exception as exc:  # noqa: BLE001 - a broken package must not stop the server
            log.warning("frontend '%s' (%s) cannot be loaded: %s", entry.name, entry.value, exc)
            continue
        if not isinstance(frontend, Frontend):
            log.warning(
                "frontend '%s' (%s) is a %s, not a naiad.frontends.Frontend; left out",
                entry.name,
                entry.value,
                type(frontend).__name__,
            )
            continue
        found[entry.name] = frontend
    if not found:
        # naiad's own frontends are entry points of the installed distribution: a source
        # tree put on the path without installing it has none.
        log.warning(
            "no frontends found under the '%s' entry points: is naiad installed (pip install)?", ENTRY_POINT_GROUP
        )
    return sorted(found.values(), key=lambda f: (f.order, f.name))


def frontend_options(
    frontends: Iterable[Frontend[Any]], args: argparse.Namespace, shared_ports: bool = False
) -> dict[str, Any]:
    """Each frontend's options object, by name. An address left None takes its
    `address_from` frontend's; with `shared_ports` (several worker processes) every frontend
    served by every worker reuses its port."""
    resolved: dict[str, Any] = {}
    for frontend in sorted(frontends, key=lambda f: (f.order, f.name)):
        options = options_from_flags(frontend.options, args)
        changes: dict[str, Any] = {}
        if frontend.address_from is not None and getattr(options, "address", "") is None:
            source = resolved.get(frontend.address_from)
            if source is not None:
                changes["address"] = source.address
        if shared_ports and frontend.on_every_worker and hasattr(options, "reuse_port"):
            changes["reuse_port"] = True
        resolved[frontend.name] = dataclasses.replace(options, **changes) if changes else options
    return resolved


async def start_frontends(
    server: Server, frontends: Iterable[Frontend[Any]], options: Mapping[str, Any], stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """Start the enabled ones among `frontends`, one after the other; one that fails to start
    is logged and sets `stop` (its task is then done)."""
    tasks: list[asyncio.Task[None]] = []
    for frontend in frontends:
        if not options[frontend.name].enabled:
            continue
        started = asyncio.Event()
        task = asyncio.create_task(frontend.run(server, options[frontend.name], started), name=f"naiad-{frontend.name}")
        tasks.append(task)
        waiter = asyncio.create_task(started.wait())
        done, _ = await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            waiter.cancel()
            log.error("%s frontend failed to start: %s", frontend.name, task.exception())
            stop.set()
            break
    return tasks
