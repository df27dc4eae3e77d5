"""How many CPUs' worth of time the cgroups of this process allow: a container limited to
2 CPUs on a 64-core host sees 64 CPUs in its affinity mask, and one worker per CPU would be
64 processes, each loading every model, sharing two CPUs of time.

cgroup v2 states the limit in `cpu.max` ("200000 100000": quota and period, microseconds;
"max 100000": none), cgroup v1 in `cpu.cfs_quota_us` (-1: none) and `cpu.cfs_period_us`. A
limit set on a parent cgroup holds for its children, so the smallest along the path counts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["cpu_quota"]

_V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def cpu_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time allowed (2.5 for a quota of 250 ms per 100 ms), or None when no
    cgroup of this process sets a limit, or it cannot be read (not Linux, no cgroup fs)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        if hierarchy == "0" and not controllers:  # the cgroup v2 hierarchy
            limits += _along(root, path, _v2_limit)
        elif "cpu" in controllers.split(","):
            mount = next((root / name for name in _V1_CPU_MOUNTS if (root / name).is_dir()), None)
            if mount is not None:
                limits += _along(mount, path, _v1_limit)
    return min(limits) if limits else None


def _along(base: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """The limits set on the cgroup at `path` below `base` and on each of its parents.
    Inside a container the path is often "/" (a cgroup namespace): its own cgroup is `base`."""
    parts = [part for part in path.split("/") if part]
    found = []
    for depth in range(len(parts), -1, -1):
        limit = read(base.joinpath(*parts[:depth]))
        if limit is not None:
            found.append(limit)
    return found


def _v2_limit(directory: Path) -> float | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1_limit(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
