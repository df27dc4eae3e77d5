"""`--pin-loop-threads`: which CPU a worker's loop goes on, and what the threads it starts get."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from naiad import cpu_affinity
from naiad.scheduling.instance_thread import InstanceThread
from naiad.workers import Topology, loop_cpu, pin_event_loop

USABLE = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
needs_two_cpus = pytest.mark.skipif(len(USABLE) < 2, reason="pinning needs two usable CPUs")


def topology(index: int, count: int, cpus: tuple[int, ...]) -> Topology:
    return Topology(index, count, "/nonexistent", cpus=cpus)


def test_auto_gives_worker_i_the_ith_usable_cpu() -> None:
    assert loop_cpu("auto", topology(0, 2, (4, 6))) == 4
    assert loop_cpu("auto", topology(1, 2, (4, 6))) == 6


def test_nothing_is_pinned_unless_there_is_one_worker_per_usable_cpu() -> None:
    assert loop_cpu("auto", None) is None  # --workers 1
    assert loop_cpu("auto", topology(0, 1, (0, 1))) is None
    assert loop_cpu("auto", topology(2, 3, (0, 1))) is None  # two loops would share a CPU
    # Every server with fewer workers than CPUs would pile onto the same first CPUs.
    assert loop_cpu("auto", topology(1, 2, (0, 1, 2, 3))) is None
    assert loop_cpu("auto", topology(0, 2, ())) is None  # the platform cannot tell
    assert loop_cpu("off", topology(0, 2, (0, 1))) is None


def test_the_cpus_reach_every_worker_through_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    worker0 = topology(0, 2, (2, 5))
    for name, value in worker0.environment_of(1, restarted=True).items():
        monkeypatch.setenv(name, value)
    worker1 = Topology.from_environment()
    assert worker1 is not None and (worker1.index, worker1.cpus, worker1.restarted) == (1, (2, 5), True)


def _in_pinned_loop(cpu: int, body: Callable[[], Any]) -> Any:
    """Runs the coroutine `body()` on a fresh loop in a thread of its own, after pinning that
    loop's thread like a worker does; returns its result. The test's own thread is untouched."""
    outcome: dict[str, Any] = {}

    def thread() -> None:
        async def main() -> None:
            pin_event_loop(asyncio.get_running_loop(), cpu, tuple(sorted(USABLE)))
            outcome["loop"] = os.sched_getaffinity(0)
            outcome["result"] = await body()

        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            outcome["error"] = exc

    runner = threading.Thread(target=thread)
    runner.start()
    runner.join(30)
    if "error" in outcome:
        raise outcome["error"]
    assert outcome["loop"] == {cpu}
    return outcome["result"]


@pytest.fixture
def server_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """pin_calling_thread records the server's CPUs for the process: undo it after the test."""
    monkeypatch.setattr(cpu_affinity, "_server_cpus", None)


@needs_two_cpus
@pytest.mark.usefixtures("server_cpus")
def test_the_default_executor_of_a_pinned_loop_runs_on_every_cpu() -> None:
    cpu = max(USABLE)
    seen = _in_pinned_loop(cpu, lambda: asyncio.to_thread(os.sched_getaffinity, 0))
    assert seen == USABLE


@needs_two_cpus
@pytest.mark.usefixtures("server_cpus")
def test_an_instance_thread_started_by_a_pinned_loop_runs_on_every_cpu() -> None:
    async def first_batch() -> set[int]:
        worker = InstanceThread("naiad-test")
        try:
            return await worker.run(os.sched_getaffinity, 0)
        finally:
            worker.close()

    assert _in_pinned_loop(min(USABLE), first_batch) == USABLE


def test_release_leaves_threads_alone_when_nothing_was_pinned(server_cpus: None) -> None:
    before = os.sched_getaffinity(0)
    cpu_affinity.release_calling_thread()
    assert os.sched_getaffinity(0) == before
