"""Opt-in helpers for framework backends: stack a batch of requests into one tensor per
input, and split the framework's batched outputs back into per-request arrays.

Only requests whose inputs agree on every dimension but the first can share one framework
call; `group_stackable` finds those groups so variable-shape models still batch what they
can. BYTES (object arrays) stack like every other datatype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import NaiadError
from .inference import InferenceRequest

__all__ = ["StackedBatch", "group_stackable", "stack_requests", "split_outputs"]


@dataclass(slots=True)
class StackedBatch:
    """Inputs of several requests concatenated along axis 0.

    `sizes[i]` is how many rows request `i` contributed (its batch size), so outputs are
    split back in the same order with `split_outputs`.
    """

    inputs: dict[str, np.ndarray]
    sizes: list[int]

    @property
    def total(self) -> int:
        return sum(self.sizes)


def _signature(request: InferenceRequest) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    return tuple(sorted((t.name, t.datatype, tuple(t.shape[1:])) for t in request.inputs))


def group_stackable(requests: list[InferenceRequest]) -> list[list[int]]:
    """Indices of `requests` grouped so every group can be stacked: same input names,
    datatypes and non-batch dimensions. Groups keep the requests' order."""
    groups: dict[tuple, list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(_signature(request), []).append(index)
    return list(groups.values())


def stack_requests(requests: list[InferenceRequest], names: list[str] | None = None) -> StackedBatch:
    """Concatenate each input along axis 0 (the batch dimension of batching models).

    `names` limits the inputs stacked (default: the first request's inputs). Every request
    must carry every named input with matching non-batch dimensions; `group_stackable`
    makes groups for which that holds.
    """
    if not requests:
        raise ValueError("stack_requests needs at least one request")
    first = requests[0]
    if len(requests) == 1 and names is None:
        # The common unbatched case: no copies, no searching.
        inputs = {t.name: t.data for t in first.inputs}
        return StackedBatch(inputs, [int(first.inputs[0].shape[0]) if first.inputs and first.inputs[0].shape else 1])
    wanted = names if names is not None else [t.name for t in first.inputs]
    sizes: list[int] = []
    for request in requests:
        tensor = request.input(wanted[0]) if wanted else None
        sizes.append(int(tensor.shape[0]) if tensor is not None and tensor.shape else 1)
    inputs: dict[str, np.ndarray] = {}
    for name in wanted:
        arrays = []
        for request in requests:
            tensor = request.input(name)
            if tensor is None:
                raise NaiadError.invalid(f"input '{name}' is missing from a request of the batch")
            arrays.append(tensor.data)
        inputs[name] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=0)
    return StackedBatch(inputs, sizes)


def split_outputs(array: np.ndarray, sizes: list[int], name: str = "output") -> list[np.ndarray]:
    """Split a batched output into one array per request (views, no copies).

    Raises NaiadError when the output's first dimension does not hold the whole batch,
    which means the model does not batch along axis 0 as its config claims.
    """
    total = sum(sizes)
    if len(sizes) == 1:
        return [array]
    if array.ndim == 0 or array.shape[0] != total:
        raise NaiadError.internal(
            f"output '{name}' has shape {list(array.shape)}; a batch of {total} needs its first "
            f"dimension to be {total} to split it between {len(sizes)} requests"
        )
    bounds = np.cumsum(sizes)[:-1]
    return np.split(array, bounds, axis=0)
