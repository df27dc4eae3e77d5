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
    server = _new_server(plan, topology)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # The model home serves what only the process holding the models can (the metrics).
    frontends = [f for f in plan.frontends if f.on_every_worker or not isinstance(server, FrontDoor)]
    # At start-up the ports come first: one that is taken fails before any model loads, and
    # health probes are answered (live, not ready) while the models load. A worker started
    # again joins a server that serves: it takes no connection before it can answer it.
    listen_first = topology is None or not topology.restarted
    tasks: list[asyncio.Task[None]] = []
    if listen_first:
        tasks = await start_frontends(server, frontends, plan.frontend_options, stop)
        if any(task.done() for task in tasks):
            await _shut_down(server, tasks, plan.options.exit_timeout_secs, quiet=True)
            return 1
        if not is_worker():  # worker 0 speaks for the server
            log.info("naiad is live (%s); not ready until the models are loaded", _names(tasks))
    if not await _start_server(server, plan, pool, topology):
        await _shut_down(server, tasks, plan.options.exit_timeout_secs, quiet=True)
        return 1
    if not listen_first:
        tasks = await start_frontends(server, frontends, plan.frontend_options, stop)
    _stop_on_signals(loop, stop)
    failed = any(task.done() for task in tasks)
    stopping = asyncio.create_task(stop.wait())
    orphaned = asyncio.create_task(wait_orphaned()) if is_worker() else None
    supervising = None
    if not failed and pool is not None:
        failed = not await _wait_for_workers(pool, stopping)
        if not failed:
            if isinstance(server, FrontDoor):
                server.tell_home_workers_serve()
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


def _new_server(plan: ServePlan, topology: Topology | None) -> Server:
    """The server of this process, not started yet: the one holding the models (one process,
    or the model home), or a front door to them."""
    if topology is None:
        return Server(plan.options)
    if topology.home:
        return ModelHome(plan.options, topology)
    return FrontDoor(plan.options, topology)


async def _start_server(server: Server, plan: ServePlan, pool: WorkerPool | None, topology: Topology | None) -> bool:
    """Load the models (or, in a front door, connect to the model home once it has); False
    when this process must not serve (the reason is logged)."""
    if not isinstance(server, FrontDoor):
        return await _start_models(server, _worker_rows(plan, topology))
    linked = asyncio.create_task(server.start())
    if pool is None:
        await linked
        return True
    # Worker 0 also watches the model home: one that exits before it serves ends the server.
    home = asyncio.create_task(pool.wait_home())
    await asyncio.wait([linked, home], return_when=asyncio.FIRST_COMPLETED)
    if home.done() and home.exception() is not None:
        log.error("error: the model home did not start: %s", home.exception())
        linked.cancel()
        await asyncio.gather(linked, return_exceptions=True)
        return False
    await linked
    return True


async def _start_models(server: Server, extra: list[tuple[str, str]]) -> bool:
    """Start a server that holds the models, print its start-up tables; False when it must
    not serve (the reason is logged; the caller stops it)."""
    try:
        await server.start()
    except NaiadError as exc:
        # A start-up failure (a repository that is not there, ...) is one line, as in tritonserver.
        log.error("error: creating server: %s", exc.message)
        return False
    extra.append(("compiled_modules", compiled_modules()))
    for table in (backend_table(server), model_table(server), options_table(server, extra)):
        print(table, file=sys.stderr, flush=True)
    if server.startup_failures and server.options.exit_on_error:
        log.error("exiting: %d model(s) failed to load (--exit-on-error=true)", len(server.startup_failures))
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
    frontends = _names(tasks)
    if signal_worker_ready():
        log.info("worker %s serves: %s", os.environ.get(WORKER_INDEX_ENV, "?"), frontends)
    else:
        workers = f" ({plan.workers} worker processes)" if pool is not None else ""
        log.info("%s: %s%s", READY_LINE, frontends, workers)


def _names(tasks: list[asyncio.Task[None]]) -> str:
    """The frontends these tasks run, for a log line."""
    return ", ".join(t.get_name().removeprefix("naiad-") for t in tasks) or "no frontends"


def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """A signal sets `stop` from now on. Before (while the models load) it ends the process at
    once, as it did before any port was open: there is nothing to drain yet."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _on_stop_signal, sig, stop)


def _on_stop_signal(sig: signal.Signals, stop: asyncio.Event) -> None:
    """A signal drains (up to --exit-timeout-secs, then each model's finalize). A SIGINT while
    draining, a Ctrl-C pressed again, ends the process at once: the models' processes leave
    stop signals to the server, so without it a model stuck in `execute` would keep the user
    waiting out both timeouts. They see their socket close and leave too. A repeated SIGTERM
    changes nothing: worker 0 sends one to each worker as it stops them, after any the
    service manager sent."""
    if not stop.is_set() or sig != signal.SIGINT:
        stop.set()
        return
    log.warning("%s again while shutting down: exiting now, without waiting for the models", sig.name)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(128 + sig)


async def _shut_down(server: Server, tasks: list[asyncio.Task[None]], timeout_s: float, quiet: bool = False) -> None:
    """The frontends first: they stop listening, answer what their open connections ask
    (each connection's last answer says it closes, an HTTP/2 connection sends GOAWAY) and
    close, within `timeout_s`. A request arriving on an open connection meanwhile is served,
    not refused; what is still in flight after them (a model's BLS call) gets the rest."""
    if not quiet:
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
