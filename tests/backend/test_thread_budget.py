"""`BackendContext.thread_budget`: the threads a framework pool gets, from the CPUs the server
may use (a cgroup CPU limit included) and the instances that use the pool at once."""

from __future__ import annotations

import pytest

from naiad import BackendContext
from naiad.backend import abi


@pytest.fixture
def machine_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abi.os, "cpu_count", lambda: 8)


@pytest.mark.usefixtures("machine_of_8")
def test_a_limit_below_the_machine_sizes_the_pool() -> None:
    assert BackendContext("x", cpu_count=2).thread_budget() == 2
    assert BackendContext("x", cpu_count=3).thread_budget(2) == 1


@pytest.mark.usefixtures("machine_of_8")
def test_instances_running_at_once_share_the_cpus() -> None:
    assert BackendContext("x", cpu_count=8).thread_budget(2) == 4
    assert BackendContext("x", cpu_count=8).thread_budget(16) == 1


@pytest.mark.usefixtures("machine_of_8")
def test_the_frameworks_default_stays_where_it_fits() -> None:
    # The whole machine and one user of the pool: the framework knows best (physical cores).
    assert BackendContext("x", cpu_count=8).thread_budget() is None
    # Not known: an embedding application built the context itself.
    assert BackendContext("x").thread_budget(4) is None


def test_the_server_gives_backends_the_cpus_it_may_use() -> None:
    from numpy_backend import NumpyPlugin

    from naiad.cpu_affinity import usable_cpu_count
    from naiad.models.backend_registry import BackendRegistry

    backend = BackendRegistry({}, [NumpyPlugin()], load_entry_points=False).get("numpy")
    assert backend.context.cpu_count == usable_cpu_count() >= 1
