"""Which requests may share one batch tensor.

Stacking requests along the batch dimension needs every other dimension to agree, so
requests whose variable-size dims differ go to separate batches, unless the input is
declared `allow_ragged_batch` (the backend then receives the requests' elements
concatenated). Shape tensors are values, not data: requests share a batch only when
those values are equal. Requests must also carry the same set of (optional) inputs.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..config.model_config import ModelConfig
from .job import Job

__all__ = ["BatchSignature"]


class BatchSignature:
    """`of(job)`: what must be equal for two jobs of one model to share a batch."""

    def __init__(self, config: ModelConfig) -> None:
        self._ragged = {spec.name for spec in config.inputs if spec.allow_ragged_batch}
        self._shape_tensors = {spec.name for spec in config.inputs if spec.is_shape_tensor}

    def of(self, job: Job) -> Hashable:
        parts: list[tuple] = []
        for tensor in sorted(job.request.inputs, key=_by_name):
            if tensor.name in self._shape_tensors:
                parts.append((tensor.name, tuple(tensor.shape), tensor.data.tobytes()))
            elif tensor.name in self._ragged:
                parts.append((tensor.name,))
            else:
                parts.append((tensor.name, tuple(tensor.shape[1:])))
        return tuple(parts)


def _by_name(tensor) -> str:
    return tensor.name
