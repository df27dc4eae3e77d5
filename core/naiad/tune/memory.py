"""The memory a server uses: the proportional set size (PSS) of its process tree, from Linux's
/proc/PID/smaps_rollup.

PSS counts a page shared by N processes as 1/N in each, so the sum over a server's workers,
model home and model processes is what the tree costs the machine, without counting the
shared libraries and the forked model code once per process (as RSS would).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["process_tree", "tree_pss_mb"]

_PROC = Path("/proc")


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (children of every thread), parents first."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        found.append(current)
        for task in sorted((_PROC / str(current) / "task").glob("*")):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def _pss_kb(pid: int) -> int | None:
    try:
        text = (_PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


def tree_pss_mb(pid: int) -> float | None:
    """The PSS of `pid`'s tree in MiB, None where it cannot be read (no such process, not
    Linux, another user's process)."""
    sizes = [_pss_kb(member) for member in process_tree(pid)]
    known = [size for size in sizes if size is not None]
    if not known:
        return None
    return sum(known) / 1024
