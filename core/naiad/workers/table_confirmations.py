"""Numbered model tables and the front doors' confirmations of them.

The model home sends its model table to every front door after each change; a front door
applies it on its own event loop, later. A load or unload therefore answers its client only
once every front door has confirmed the table that shows it: the client's next request then
finds the model as the change left it, whichever front door the kernel hands its connection
to. A front door that does not confirm in time (its event loop stuck) is not waited for
longer: the change answers, and the warning names it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import Protocol

__all__ = ["ConfirmingFrontDoor", "TableConfirmations", "CONFIRM_TIMEOUT_S"]

log = logging.getLogger("naiad.workers")

CONFIRM_TIMEOUT_S = 10.0


class ConfirmingFrontDoor(Protocol):
    # The front door's worker index, for the warning.
    index: int
    # The number of the last table it confirmed it applied.
    applied: int


class TableConfirmations:
    """Numbers the tables; `wait_for(number)` returns once every front door connected now (in
    `front_doors`, a live collection) has confirmed `number` or a later table."""

    def __init__(self, front_doors: Collection[ConfirmingFrontDoor], timeout_s: float = CONFIRM_TIMEOUT_S) -> None:
        self._front_doors = front_doors
        self._timeout_s = timeout_s
        self.number = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def next_number(self) -> int:
        self.number += 1
        return self.number

    def _seen_everywhere(self, number: int) -> bool:
        return all(door.applied >= number for door in self._front_doors)

    async def wait_for(self, number: int) -> None:
        if self._seen_everywhere(number):
            return
        entry = (number, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(entry[1], self._timeout_s)
        except TimeoutError:
            late = sorted(door.index for door in self._front_doors if door.applied < number)
            log.warning(
                "front door(s) %s did not apply the model table within %g s; the change answers without them",
                ", ".join(map(str, late)),
                self._timeout_s,
            )
        finally:
            self._waiters.remove(entry)

    def changed(self) -> None:
        """A front door confirmed a table, or went away: wake the waits now satisfied."""
        for number, waiter in self._waiters:
            if not waiter.done() and self._seen_everywhere(number):
                waiter.set_result(None)
