"""One process of `naiad serve`: the server with its models (or a front door to them), its
frontends, and the shutdown that drains them."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from naiad_wire.balance import ConnectionBalancer
from naiad_wire.balance import install as install_balancer
from naiad_wire.balance import retire as retire_balancer

from ..cpu_affinity import release_process
from ..errors import NaiadError
from ..frontends.frontend import Frontend
from ..server import Server, ServerOptions
from ..workers import (
    WORKER_INDEX_ENV,
    FrontDoor,
    ModelHome,
    Topology,
    WorkerPool,
    is_worker,
    loop_cpu,
    pin_event_loop,
    signal_worker_ready,
    wait_orphaned,
    worker_0,
)
from ..workers.linux_process import HOME_NAME, name_process, worker_name
from .frontend_plugins import start_frontends
from .startup_tables import backend_table, compiled_modules, model_table, options_table

__all__ = ["READY_LINE", "ServePlan", "serve"]

# Logged once every frontend listens; scripts and naiad.testing.ServerProcess wait for it.
READY_LINE: Final = "naiad is ready"

log = logging.getLogger("naiad")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePlan:
    """What a process of `naiad serve` runs, read from the command line once."""

    options: ServerOptions
    frontends: tuple[Frontend[Any], ...]
    # Each frontend's options object, by frontend name.
    frontend_options: Mapping[str, Any]
    workers: int = 1
    pin_loop_threads: str = "off"


async def serve(plan: ServePlan, pool: WorkerPool | None = None, topology: Topology | None = None) -> int:
    """Serve as this process's part says: one process with its models; worker 0 (with the
    `pool` it started, and its `topology`); another worker or the model home (their
    topology comes from the environment worker 0 gave them)."""
    if topology is None:
        topology = Topology.from_environment()
    if topology is not None:
        name_process(HOME_NAME if topology.home else worker_name(topology.index))
    if topology is not None and topology.restarted:
        # Started again by worker 0's pinned loop thread, this process inherited its CPU.
        release_process(topology.cpus)
    # The workers share their ports: they also even out the connections the kernel gives them.
    balancer = ConnectionBalancer(topology.directory, topology.index, topology.count) if topology else None
    if balancer is not None:
        balancer.start()
        install_balancer(balancer)
    try:
        return await _serve(plan, pool, topology)
    finally:
        if balancer is not None:
            install_balancer(None)
            balancer.close()
        if pool is not None:
            await pool.stop(plan.options.exit_timeout_secs)
            assert topology is not None
            topology.remove()


async def _serve(plan: ServePlan, pool: WorkerPool | None, topology: Topology | None) -> int:
    """One server process with its models, or a worker of several: the model home, or a
    front door."""
    server = await _start_server(plan, pool, topology)
    if server is None:
        return 1
    loop = asyncio.get_running_loop()
    stop = _stop_on_signals(loop)
    # The model home serves what only the process holding the models can (the metrics).
    frontends = [f for f in plan.frontends if f.on_every_worker or not isinstance(server, FrontDoor)]
    tasks = await start_frontends(server, frontends, plan.frontend_options, stop)
    failed = any(task.done() for task in tasks)
    stopping = asyncio.create_task(stop.wait())
    orphaned = asyncio.create_task(wait_orphaned()) if is_worker() else None
    supervising = None
    if not failed and pool is not None:
        failed = not await _wait_for_workers(pool, stopping)
        if not failed:
            supervising = asyncio.create_task(pool.supervise())
    if not failed and not stop.is_set():
        _announce(plan, loop, topology, tasks, pool)
        done, _ = await asyncio.wait(
            [t for t in (stopping, orphaned, supervising, *tasks) if t is not None], return_when=asyncio.FIRST_COMPLETED
        )
        if supervising is not None and supervising in done:
            log.error("supervising the worker processes failed (%r); stopping the server", supervising.exception())
            failed = True
        elif is_worker() and ((orphaned is not None and orphaned in done) or os.getppid() != worker_0()):
            # The watcher noticed, or the kernel's SIGTERM on worker 0's exit came first.
            log.error("worker 0 is gone; this worker stops too")
    for watcher in (stopping, orphaned, supervising):
        if watcher is not None:
            watcher.cancel()
    if pool is not None:
        pool.stop_front_doors()  # they drain beside this one; the model home stops after all
    await _shut_down(server, tasks, plan.options.exit_timeout_secs)
    return 1 if failed else 0


async def _start_server(plan: ServePlan, pool: WorkerPool | None, topology: Topology | None) -> Server | None:
    """The server of this process, started: the one holding the models (one process, or the
    model home), or a front door to them; None when it must not serve (the reason is logged)."""
    if topology is None or topology.home:
        server = Server(plan.options) if topology is None else ModelHome(plan.options, topology)
        return server if await _start_models(server, _worker_rows(plan, topology)) else None
    if pool is not None:
        try:
            await pool.wait_home()
        except RuntimeError as exc:
            log.error("error: the model home did not start: %s", exc)
            return None
    front_door = FrontDoor(plan.options, topology)
    await front_door.start()
    return front_door


async def _start_models(server: Server, extra: list[tuple[str, str]]) -> bool:
    """Start a server that holds the models, print its start-up tables; False when it must
    not serve (the reason is logged)."""
    try:
        await server.start()
    except NaiadError as exc:
        # A start-up failure (a repository that is not there, ...) is one line, as in tritonserver.
        log.error("error: creating server: %s", exc.message)
        await server.stop()
        return False
    extra.append(("compiled_modules", compiled_modules()))
    for table in (backend_table(server), model_table(server), options_table(server, extra)):
        print(table, file=sys.stderr, flush=True)
    if server.startup_failures and server.options.exit_on_error:
        log.error("exiting: %d model(s) failed to load (--exit-on-error=true)", len(server.startup_failures))
        await server.stop()
        return False
    return True


async def _wait_for_workers(pool: WorkerPool, stopping: asyncio.Task[Any]) -> bool:
    """Worker 0 waits for the other workers to serve (or for a signal); False when one
    failed to start."""
    ready = asyncio.create_task(pool.wait_ready())
    await asyncio.wait([ready, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        ready.cancel()
        return True
    if ready.exception() is not None:
        log.error("%s", ready.exception())
        return False
    return True


def _announce(
    plan: ServePlan,
    loop: asyncio.AbstractEventLoop,
    topology: Topology | None,
    tasks: list[asyncio.Task[None]],
    pool: WorkerPool | None,
) -> None:
    """Pin the loop thread where asked, and log that this process serves (the ready line,
    from the process that speaks for the server)."""
    pin_cpu = loop_cpu(plan.pin_loop_threads, topology)
    if pin_cpu is not None and topology is not None:
        _pin_loop_thread(loop, pin_cpu, topology)
    frontends = ", ".join(t.get_name().removeprefix("naiad-") for t in tasks) or "no frontends"
    if signal_worker_ready():
        log.info("worker %s serves: %s", os.environ.get(WORKER_INDEX_ENV, "?"), frontends)
    else:
        workers = f" ({plan.workers} worker processes)" if pool is not None else ""
        log.info("%s: %s%s", READY_LINE, frontends, workers)


def _stop_on_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _shut_down(server: Server, tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
    """The frontends first: they stop listening, answer what their open connections ask
    (each connection's last answer says it closes, an HTTP/2 connection sends GOAWAY) and
    close, within `timeout_s`. A request arriving on an open connection meanwhile is served,
    not refused; what is still in flight after them (a model's BLS call) gets the rest."""
    log.info("shutting down: finishing in-flight requests (up to %ss)", timeout_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    retire_balancer()  # the other workers pass this one no more connections
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await server.drain(max(0.0, deadline - loop.time()))
    await server.stop()


def _worker_rows(plan: ServePlan, topology: Topology | None) -> list[tuple[str, str]]:
    """The start-up table's rows about the workers, printed by the model home."""
    if topology is None:
        return []
    # Worker 0's pinning: each worker pins its own loop once it serves.
    pin_cpu = loop_cpu(plan.pin_loop_threads, dataclasses.replace(topology, index=0))
    cpus = ", ".join(map(str, topology.cpus))
    return [
        ("workers", f"{topology.count} (worker {topology.home_index} holds the models)"),
        ("pin_loop_threads", "no" if pin_cpu is None else f"one CPU per worker, over CPUs {cpus}"),
    ]


def _pin_loop_thread(loop: asyncio.AbstractEventLoop, cpu: int, topology: Topology) -> None:
    """Pins this worker's loop thread once it serves: the models are loaded by then, so the
    threads and processes they started kept every CPU."""
    try:
        pin_event_loop(loop, cpu, topology.cpus)
    except OSError as exc:
        log.warning(
            "--pin-loop-threads: worker %d's event loop could not be pinned to CPU %d: %s", topology.index, cpu, exc
        )
