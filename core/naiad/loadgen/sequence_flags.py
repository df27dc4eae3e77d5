"""`SequenceFlags`: the sequence controls of one request of a sequence model (sequence_id,
sequence_start, sequence_end request parameters), and `SequenceCounter`, which hands each
request of a load slot its flags."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

__all__ = ["SequenceCounter", "SequenceFlags"]


@dataclass(frozen=True, slots=True)
class SequenceFlags:
    sequence_id: int
    start: bool
    end: bool

    def parameters(self) -> dict[str, int | bool]:
        return {"sequence_id": self.sequence_id, "sequence_start": self.start, "sequence_end": self.end}


class SequenceCounter:
    """Sequences of `length` requests; ids from 1 (perf_analyzer's --sequence-id-range
    default start), each new sequence of any slot taking the next id."""

    def __init__(self, length: int, first_id: int = 1) -> None:
        self._length = length
        self._ids = itertools.count(first_id)

    def take(self) -> int:
        """An id no sequence of this counter will use."""
        return next(self._ids)

    def slot(self) -> SlotSequence:
        return SlotSequence(self._length, self._ids)


class SlotSequence:
    """One slot's position in its current sequence (a slot sends one request at a time)."""

    def __init__(self, length: int, ids: itertools.count[int]) -> None:
        self._length = length
        self._ids = ids
        self._position = 0
        self._id = 0

    def next(self) -> SequenceFlags:
        if self._position == 0:
            self._id = next(self._ids)
        start = self._position == 0
        self._position += 1
        end = self._position == self._length
        if end:
            self._position = 0
        return SequenceFlags(self._id, start, end)
