"""The search space for one model: which dimensions apply to it, with the values the user gave
or tune's defaults for this machine.

A dimension applies only where it means something: batching dimensions for a model that
batches (`max_batch_size` > 0, no sequence batcher), thread dimensions for a framework backend
that reads thread parameters (ONNX Runtime, PyTorch), `workers` only for a server tune starts
itself. A dimension the user did not ask for and tune does not search by default is left out,
so the model keeps its own setting of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..protos import model_config_pb2 as pb
from .candidate_config import THREAD_PARAMETERS, framework_of
from .space import DIMENSION_NAMES, Dimension, SearchSpace

__all__ = ["default_values", "model_space", "parse_values"]

_BATCHING = ("max_batch_size", "preferred_batch_size", "max_queue_delay_us")
_THREADS = ("intra_op_threads", "inter_op_threads")


def parse_values(text: str) -> tuple[int, ...]:
    """`1,2,4` -> (1, 2, 4); ValueError naming what is wrong."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"'{text}' is not a comma-separated list of whole numbers (e.g. 1,2,4)") from None
    if not values:
        raise ValueError("the list of values is empty (e.g. 1,2,4)")
    if any(v < 0 for v in values):
        raise ValueError(f"'{text}': values must be 0 or more")
    return values


def _doubling(start: int, limit: int, factor: int = 2) -> tuple[int, ...]:
    values, value = [], start
    while value < limit:
        values.append(value)
        value *= factor
    return (*values, limit)


def default_values(base: pb.ModelConfig, cpus: int) -> dict[str, tuple[int, ...]]:
    """tune's defaults, for the dimensions it searches unasked: instances 1, 2, ... up to twice
    the CPUs; max_batch_size 1, 4, 16, ... up to the model's own; queue delays of 0, 100 and
    1000 us; intra-op threads 1, 2, ... up to the CPUs."""
    defaults = {"instances": _doubling(1, max(2, 2 * cpus))}
    if base.max_batch_size > 0:
        defaults["max_batch_size"] = _doubling(1, base.max_batch_size, factor=4)
        defaults["max_queue_delay_us"] = (0, 100, 1000)
    if framework_of(base) in THREAD_PARAMETERS:
        defaults["intra_op_threads"] = _doubling(1, max(1, cpus))
    return defaults


def model_space(
    base: pb.ModelConfig,
    asked: Mapping[str, tuple[int, ...]],
    *,
    launched: bool,
    cpus: int | None = None,
) -> SearchSpace:
    """The space for the model whose configuration (as the server reads it) is `base`.
    `asked`: the values the user gave, by dimension. ValueError names a dimension that cannot
    apply to this model (or server)."""
    name = base.name or "the model"
    batches = base.max_batch_size > 0 or bool(asked.get("max_batch_size"))
    if base.HasField("sequence_batching") or base.HasField("ensemble_scheduling"):
        batches = False
    for dimension in asked:
        if dimension in _BATCHING and not batches:
            raise ValueError(
                f"{dimension}: '{name}' does not use dynamic batching "
                "(max_batch_size 0, a sequence batcher or an ensemble)"
            )
        if dimension in _THREADS and framework_of(base) not in THREAD_PARAMETERS:
            raise ValueError(
                f"{dimension}: the '{framework_of(base)}' backend reads no thread parameters "
                f"(tune sets them for {', '.join(THREAD_PARAMETERS)})"
            )
        if dimension == "workers" and not launched:
            raise ValueError(
                "workers: tune can only change the workers of a server it starts itself (give a model repository)"
            )
    if base.HasField("ensemble_scheduling"):
        raise ValueError(f"'{name}' is an ensemble: tune its composing models one by one")
    values = {**default_values(base, cpus or len(os.sched_getaffinity(0))), **asked}
    if not batches:
        values = {k: v for k, v in values.items() if k not in _BATCHING}
    return SearchSpace(tuple(Dimension(d, tuple(sorted(values[d]))) for d in DIMENSION_NAMES if d in values))
