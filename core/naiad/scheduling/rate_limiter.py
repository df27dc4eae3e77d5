"""Triton's rate limiter (`--rate-limit execution_count`): one per server, shared by every
model, so instances of different models can be kept from running at the same time.

An instance group's `rate_limiter { resources [...] priority }` says what each of its
instances holds while it executes. Before a batch runs, the instance waits until those
resources are free; they are taken for the execution and given back after it. Among the
instances waiting, the one with the fewest executions times its priority (a priority of 0
counts as 1) goes first, and nothing passes it while it waits: a big request is not starved
by small ones.

A resource is per device unless a config marks it `global: true` (one pool for the whole
server). How many of a resource there are: the most any loaded instance asks for, or,
once any `--rate-limit-resource` is given, what those flags say (a resource they do not
name has none, as in Triton). A config that asks for more than there are fails its load.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import NaiadError
from ..protos import model_config_pb2 as pb

__all__ = ["InstanceGate", "RateLimiter", "ResourceLimit", "parse_rate_limit", "parse_rate_limit_resource"]

MODES = ("off", "execution_count")

# A resource pool: (device, name); device None is the server-wide pool of a global resource.
_Pool = tuple["int | None", str]


@dataclass(frozen=True, slots=True)
class ResourceLimit:
    """One `--rate-limit-resource NAME:COUNT[:DEVICE]`; no device: every device."""

    name: str
    count: int
    device: int | None = None


def parse_rate_limit(text: str) -> str:
    """`--rate-limit`: `execution_count` or `off`, in any case, as tritonserver reads it."""
    mode = text.lower()
    if mode not in MODES:
        raise ValueError("invalid argument for --rate-limit")
    return mode


def parse_rate_limit_resource(text: str) -> ResourceLimit:
    """`NAME:COUNT` or `NAME:COUNT:DEVICE`; the name keeps its case, as in tritonserver."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(
            f"--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
            f"'<resource_name>:<count>'. Got {text}"
        )
    try:
        count = int(parts[1])
        device = int(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise ValueError(f"Invalid option value. Got {text}") from None
    return ResourceLimit(parts[0], count, device)


class InstanceGate:
    """One model instance's place in the rate limiter: `acquire` before each execution,
    `release` after it, `close` when the instance is finalized."""

    def __init__(self, limiter: RateLimiter, needs: dict[_Pool, int], priority: int) -> None:
        self._limiter = limiter
        self.needs = needs
        self.priority = max(priority, 1)
        self.executions = 0

    async def acquire(self) -> None:
        await self._limiter._acquire(self)

    def release(self) -> None:
        self._limiter._release(self)

    def close(self) -> None:
        self._limiter._withdraw([self])


@dataclass(eq=False)
class _Waiter:
    gate: InstanceGate
    future: asyncio.Future[None]
    loop: asyncio.AbstractEventLoop


class RateLimiter:
    """The server's rate limiter. `admit` runs where models load (any thread);
    `acquire` and `release` run on the event loop of the instance's scheduler."""

    def __init__(self, mode: str = "off", resources: Sequence[ResourceLimit] = ()) -> None:
        self.mode = parse_rate_limit(mode)
        self.resources = tuple(resources)
        self._lock = threading.Lock()
        self._gates: list[InstanceGate] = []
        self._available: dict[_Pool, int] = {}
        self._in_use: Counter[_Pool] = Counter()
        self._waiting: list[tuple[int, int, _Waiter]] = []
        self._order = itertools.count()

    @property
    def enabled(self) -> bool:
        return self.mode == "execution_count"

    def admit(self, config: pb.ModelConfig, instances: Iterable[tuple[str, int]]) -> list[InstanceGate | None]:
        """Gates for a model's instances, given as (instance group name, device). With the
        limiter off, none (the config's rate_limiter is ignored, as in Triton). Raises
        with Triton's message when the resources cannot all be had; nothing is admitted then."""
        instances = list(instances)
        if not self.enabled:
            return [None] * len(instances)
        groups = {group.name: group.rate_limiter for group in config.instance_group}
        gates: list[InstanceGate] = []
        for group_name, device in instances:
            settings = groups.get(group_name, pb.ModelRateLimiter())
            # `global` is a Python keyword: the proto field is read by name.
            needs = {(None if getattr(r, "global") else device, r.name): r.count for r in settings.resources}
            gates.append(InstanceGate(self, needs, settings.priority))
        with self._lock:
            try:
                self._available = self._limits(self._gates + gates)
            except NaiadError as exc:
                raise NaiadError.invalid(f"failed to load '{config.name}': {exc.message}") from None
            self._gates.extend(gates)
            # More of a resource may now be available to instances already waiting.
            self._allocate()
        return list(gates)

    def _withdraw(self, gates: Sequence[InstanceGate]) -> None:
        with self._lock:
            remaining = [g for g in self._gates if all(g is not gone for gone in gates)]
            if len(remaining) == len(self._gates):
                return
            self._gates = remaining
            self._available = self._limits(remaining)
            self._allocate()

    def _limits(self, gates: Sequence[InstanceGate]) -> dict[_Pool, int]:
        """How many of each resource there are, given the instances loaded (Triton's rules)."""
        most: dict[_Pool, int] = {}
        for gate in gates:
            for pool, count in gate.needs.items():
                most[pool] = max(most.get(pool, 0), count)
        global_names = {name for device, name in most if device is None}
        for device, name in most:
            if device is not None and name in global_names:
                raise NaiadError.invalid(
                    f'Resource "{name}" is present as both global and device-specific resource in the model '
                    "configuration."
                )
        if not self.resources:
            return most
        available = {}
        for (device, name), needed in most.items():
            # A global resource takes the largest count given for its name on any device.
            count = max(
                (r.count for r in self.resources if r.name == name and (device is None or r.device in (None, device))),
                default=0,
            )
            if count < needed:
                raise NaiadError.invalid(
                    f'Resource count for "{name}" is limited to {count} which will prevent scheduling of one or '
                    f"more model instances, the minimum required count is {needed}"
                )
            available[(device, name)] = count
        return available

    async def _acquire(self, gate: InstanceGate) -> None:
        loop = asyncio.get_running_loop()
        waiter = _Waiter(gate, loop.create_future(), loop)
        with self._lock:
            heapq.heappush(self._waiting, (gate.executions * gate.priority, next(self._order), waiter))
            self._allocate()
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                granted = all(entry[2] is not waiter for entry in self._waiting)
                if not granted:
                    self._waiting = [entry for entry in self._waiting if entry[2] is not waiter]
                    heapq.heapify(self._waiting)
            if granted:
                self._give_back(gate)
            raise

    def _release(self, gate: InstanceGate) -> None:
        gate.executions += 1
        self._give_back(gate)

    def _give_back(self, gate: InstanceGate) -> None:
        with self._lock:
            self._in_use.subtract(gate.needs)
            self._allocate()

    def _allocate(self) -> None:
        """Grant waiting instances in order while the first one's resources are free.
        Called with the lock held."""
        while self._waiting:
            waiter = self._waiting[0][2]
            needs = waiter.gate.needs
            if any(self._in_use[pool] + count > self._available.get(pool, 0) for pool, count in needs.items()):
                return
            heapq.heappop(self._waiting)
            self._in_use.update(needs)
            waiter.loop.call_soon_threadsafe(_grant, waiter.future)


def _grant(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
