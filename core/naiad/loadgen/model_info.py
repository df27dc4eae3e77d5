"""`ModelInfo`: what a load step needs to know of a model, read from its metadata and
config (either protocol's documents)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ModelInfo", "TensorInfo"]


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    datatype: str
    # Without the batch dimension; -1 for a variable dimension.
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    max_batch_size: int
    is_sequence: bool
    # Models whose responses may be many or none (decoupled) cannot be measured request by request.
    decoupled: bool

    @classmethod
    def read(cls, metadata: dict[str, Any], config: dict[str, Any]) -> ModelInfo:
        max_batch_size = int(config.get("max_batch_size", 0) or 0)

        def tensors(key: str) -> tuple[TensorInfo, ...]:
            found = []
            for entry in metadata.get(key, []):
                shape = tuple(int(d) for d in entry.get("shape", []))
                # Metadata lists the batch dimension (-1) first for a model that batches.
                if max_batch_size > 0 and shape:
                    shape = shape[1:]
                found.append(TensorInfo(str(entry["name"]), str(entry["datatype"]), shape))
            return tuple(found)

        policy = config.get("model_transaction_policy") or {}
        return cls(
            name=str(metadata.get("name", "")),
            inputs=tensors("inputs"),
            outputs=tensors("outputs"),
            max_batch_size=max_batch_size,
            is_sequence="sequence_batching" in config,
            decoupled=bool(policy.get("decoupled", False)),
        )
