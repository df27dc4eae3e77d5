"""The default worker count under a cgroup CPU limit: files laid out as the kernel shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from naiad import cpu_affinity
from naiad.cpu_quota import cpu_quota
from naiad.workers import topology


def cgroup_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proc-self-cgroup"
    path.write_text(text)
    return path


def write(path: Path, **files: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name.replace("_", ".", 1)).write_text(text)


def test_cgroup_v2_quota_in_a_namespace(tmp_path: Path) -> None:
    # Inside a container the process's cgroup is "/": the root of the mounted hierarchy.
    write(tmp_path / "fs", cpu_max="250000 100000\n")
    assert cpu_quota(cgroup_file(tmp_path, "0::/\n"), tmp_path / "fs") == 2.5


def test_cgroup_v2_the_smallest_limit_along_the_path_counts(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    write(fs / "kubepods", cpu_max="400000 100000\n")
    write(fs / "kubepods" / "pod1", cpu_max="150000 100000\n")
    write(fs / "kubepods" / "pod1" / "app", cpu_max="max 100000\n")
    assert cpu_quota(cgroup_file(tmp_path, "0::/kubepods/pod1/app\n"), fs) == 1.5


def test_no_limit_is_none(tmp_path: Path) -> None:
    write(tmp_path / "fs" / "user.slice", cpu_max="max 100000\n")
    assert cpu_quota(cgroup_file(tmp_path, "0::/user.slice\n"), tmp_path / "fs") is None
    assert cpu_quota(tmp_path / "missing", tmp_path / "fs") is None  # not Linux
    assert cpu_quota(cgroup_file(tmp_path, "garbage\n"), tmp_path / "fs") is None


def test_cgroup_v1_quota_and_unlimited(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    write(fs / "cpu,cpuacct" / "docker" / "abc", cpu_cfs_quota_us="300000\n", cpu_cfs_period_us="100000\n")
    write(fs / "cpu,cpuacct", cpu_cfs_quota_us="-1\n", cpu_cfs_period_us="100000\n")
    lines = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"
    assert cpu_quota(cgroup_file(tmp_path, lines), fs) == 3.0
    assert cpu_quota(cgroup_file(tmp_path, "3:cpu,cpuacct:/\n"), fs) is None


def test_the_default_worker_count_follows_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_affinity, "usable_cpus", lambda: tuple(range(64)))
    monkeypatch.setattr(cpu_affinity, "cpu_quota", lambda: 2.5)  # 2.5 CPUs' worth of time: 3 workers
    assert topology.worker_count(None, []) == 3
    monkeypatch.setattr(cpu_affinity, "cpu_quota", lambda: None)
    assert topology.worker_count(None, []) == 64
    monkeypatch.setattr(cpu_affinity, "cpu_quota", lambda: 0.2)
    assert topology.worker_count(None, []) == 1


def test_two_cpus_or_fewer_serve_from_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_affinity, "cpu_quota", lambda: None)
    for cpus, workers in ((1, 1), (2, 1), (3, 3), (4, 4)):
        monkeypatch.setattr(cpu_affinity, "usable_cpus", lambda cpus=cpus: tuple(range(cpus)))
        assert topology.worker_count(None, []) == workers
    # An explicit count is kept.
    assert topology.worker_count(2, []) == 2
