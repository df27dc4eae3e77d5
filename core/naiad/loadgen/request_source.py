"""`RequestSource`: the encoded requests one lane sends, in order: the same bytes every time
for one data step, the data file's steps in turn otherwise, and for a sequence model the
requests of one sequence after another (start and end flags set)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .sequence_flags import SequenceCounter, SequenceFlags, SlotSequence

__all__ = ["Encoder", "RequestSource"]


class Encoder(Protocol):
    @property
    def request(self) -> bytes: ...

    def encode(self, sequence: SequenceFlags | None) -> bytes: ...


class RequestSource:
    def __init__(self, encoders: Sequence[Encoder], sequences: SequenceCounter | None) -> None:
        self._encoders = encoders
        self._fixed = [encoder.request for encoder in encoders]
        self._sequence: SlotSequence | None = sequences.slot() if sequences is not None else None
        self._index = 0

    def next(self) -> bytes:
        index = self._index
        self._index = (index + 1) % len(self._fixed)
        if self._sequence is None:
            return self._fixed[index]
        return self._encoders[index].encode(self._sequence.next())
