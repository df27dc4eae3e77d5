"""Auto-complete of a TensorRT model's config from its engine.

It follows the same rules as the other backends: `max_batch_size` 0 becomes the largest
batch the engine's optimization profiles accept when every IO tensor has a dynamic first
dimension (unless the config lists a tensor with the engine's full rank); unlisted
inputs/outputs are added; listed ones get missing types and dims.
"""

from __future__ import annotations

from naiad.backend import ModelConfig
from naiad.backend.helpers import complete_tensors
from naiad.backend.helpers import model_config_pb2 as pb

from .engine_description import EngineDescription

__all__ = ["auto_complete_from_engine", "PLATFORM"]

PLATFORM = "tensorrt_plan"


def auto_complete_from_engine(config: ModelConfig, engine: EngineDescription, model: str) -> None:
    proto = config.proto
    if not proto.platform:
        proto.platform = PLATFORM
    capacity = engine.batch_capacity()
    # A max_batch_size the config writes, 0 included, is the user's: only an absent one is filled.
    written = config.user_wrote("max_batch_size")
    if proto.max_batch_size == 0 and not written and capacity > 0 and not _lists_full_rank_tensor(proto, engine):
        proto.max_batch_size = capacity
    batching = proto.max_batch_size > 0
    shape_tensors = {t.name for t in engine.tensors if t.is_shape_tensor}
    # Engine order: the order the network declared them.
    complete_tensors(
        proto, engine.inputs, engine.outputs, batching, model=model, source="engine", shape_tensors=shape_tensors
    )
    if proto.max_batch_size > 1 and proto.WhichOneof("scheduling_choice") is None:
        proto.dynamic_batching.SetInParent()
    config.refresh()


def _lists_full_rank_tensor(proto: pb.ModelConfig, engine: EngineDescription) -> bool:
    for tensor in list(proto.input) + list(proto.output):
        found = engine.by_name.get(tensor.name)
        if found is not None and not found.is_shape_tensor and tensor.dims and len(tensor.dims) == len(found.shape):
            return True
    return False
