"""The search space of `naiad tune`: its dimensions (each an ordered list of values to try) and
its candidates (one value per dimension).

Every dimension is ordered from the cheapest setting to the most generous one (one instance
before four, no queue delay before a long one), so "grow a dimension" means "take its next
value" and a neighbour of a candidate is one step along one dimension.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "DIMENSION_NAMES",
    "Candidate",
    "Dimension",
    "SearchSpace",
]

# The dimensions tune knows, in the order candidates and reports list them: how much work runs
# at once, how requests are batched, the framework's own threads, naiad's front doors. (The
# quick search grows them in an order of its own: search.GROWTH_ORDER.)
DIMENSION_NAMES = (
    "instances",
    "max_batch_size",
    "preferred_batch_size",
    "max_queue_delay_us",
    "intra_op_threads",
    "inter_op_threads",
    "workers",
)


@dataclass(frozen=True, slots=True)
class Dimension:
    name: str
    values: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.name not in DIMENSION_NAMES:
            raise ValueError(f"unknown dimension '{self.name}' (known: {', '.join(DIMENSION_NAMES)})")
        if not self.values:
            raise ValueError(f"dimension '{self.name}' has no values")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"dimension '{self.name}' repeats a value: {list(self.values)}")
        if any(v < 0 for v in self.values):
            raise ValueError(f"dimension '{self.name}': values must be 0 or more, got {list(self.values)}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One point of the space: a value for every dimension, in the space's order."""

    values: tuple[tuple[str, int], ...]

    def __getitem__(self, name: str) -> int:
        for key, value in self.values:
            if key == name:
                return value
        raise KeyError(name)

    def get(self, name: str, default: int | None = None) -> int | None:
        return next((value for key, value in self.values if key == name), default)

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    @property
    def key(self) -> str:
        """A stable text naming the point (the checkpoint's key): `instances=2,max_batch_size=8`."""
        return ",".join(f"{name}={value}" for name, value in self.values)

    def replace(self, name: str, value: int) -> Candidate:
        return Candidate(tuple((key, value if key == name else old) for key, old in self.values))

    @staticmethod
    def from_dict(values: Mapping[str, int], order: tuple[str, ...]) -> Candidate:
        return Candidate(tuple((name, int(values[name])) for name in order))


@dataclass(frozen=True, slots=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]

    def __post_init__(self) -> None:
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ValueError(f"a dimension appears twice: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    def dimension(self, name: str) -> Dimension:
        return next(d for d in self.dimensions if d.name == name)

    def valid(self, candidate: Candidate) -> bool:
        """A preferred batch size larger than the maximum batch size is no configuration
        (Triton refuses it at load), so such points are not part of the space."""
        preferred, largest = candidate.get("preferred_batch_size", 0), candidate.get("max_batch_size")
        return not (preferred and largest is not None and preferred > largest)

    def start(self) -> Candidate:
        """The cheapest point: every dimension's first value."""
        return Candidate(tuple((d.name, d.values[0]) for d in self.dimensions))

    def candidates(self) -> Iterator[Candidate]:
        """Every valid point, in a fixed order (the exhaustive sweep's)."""
        for combination in itertools.product(*(d.values for d in self.dimensions)):
            candidate = Candidate(tuple(zip(self.names, combination)))
            if self.valid(candidate):
                yield candidate

    def size(self) -> int:
        return sum(1 for _ in self.candidates())

    def step(self, candidate: Candidate, name: str, direction: int) -> Candidate | None:
        """The point one value further along `name` (direction +1 or -1), None past either end
        or where it would not be valid."""
        values = self.dimension(name).values
        index = values.index(candidate[name]) + direction
        if not 0 <= index < len(values):
            return None
        moved = candidate.replace(name, values[index])
        return moved if self.valid(moved) else None

    def neighbours(self, candidate: Candidate) -> list[Candidate]:
        """Every valid point one step away along one dimension."""
        found = []
        for name in self.names:
            for direction in (1, -1):
                moved = self.step(candidate, name, direction)
                if moved is not None:
                    found.append(moved)
        return found

    def trades(self, candidate: Candidate, first: str, second: str) -> list[Candidate]:
        """The valid points one step up `first` and one step down `second`, and the other way
        round: the moves that hand the same CPUs from one use to another (instances and the
        framework's threads), which no single step can make without oversubscribing them."""
        if first not in self.names or second not in self.names:
            return []
        found = []
        for direction in (1, -1):
            moved = self.step(candidate, first, direction)
            traded = None if moved is None else self.step(moved, second, -direction)
            if traded is not None:
                found.append(traded)
        return found

    def describe(self) -> list[str]:
        """One line per dimension, for reports: `instances: 1, 2, 4`."""
        return [f"{d.name}: {', '.join(str(v) for v in d.values)}" for d in self.dimensions]
