"""Auto-complete of a TensorRT model's config from its engine.

It follows the same rules as the other backends: `max_batch_size` 0 becomes the largest
batch the engine's optimization profiles accept when every IO tensor has a dynamic first
dimension (unless the config lists a tensor with the engine's full rank); unlisted
inputs/outputs are added; listed ones get missing types and dims.
"""

from __future__ import annotations

from naiad.backend import ConfigError, ModelConfig, datatype_to_config_type
from naiad.backend import model_config_pb2 as pb

from .engine_description import EngineDescription, EngineTensor

__all__ = ["auto_complete_from_engine", "PLATFORM"]

PLATFORM = "tensorrt_plan"


def auto_complete_from_engine(config: ModelConfig, engine: EngineDescription, model: str) -> None:
    proto = config.proto
    if not proto.platform:
        proto.platform = PLATFORM
    capacity = engine.batch_capacity()
    if proto.max_batch_size == 0 and capacity > 0 and not _lists_full_rank_tensor(proto, engine):
        proto.max_batch_size = capacity
    batching = proto.max_batch_size > 0
    _complete(model, "input", proto.input, {t.name: t for t in engine.inputs}, batching)
    _complete(model, "output", proto.output, {t.name: t for t in engine.outputs}, batching)
    if proto.max_batch_size > 1 and proto.WhichOneof("scheduling_choice") is None:
        proto.dynamic_batching.SetInParent()
    config.refresh()


def _lists_full_rank_tensor(proto: pb.ModelConfig, engine: EngineDescription) -> bool:
    for tensor in list(proto.input) + list(proto.output):
        found = engine.by_name.get(tensor.name)
        if found is not None and not found.is_shape_tensor and tensor.dims and len(tensor.dims) == len(found.shape):
            return True
    return False


def _complete(model: str, kind: str, listed, tensors: dict[str, EngineTensor], batching: bool) -> None:
    if not listed:
        for name in tensors:  # engine order: the order the network declared them
            listed.add().name = name
    for index, entry in enumerate(listed):
        tensor = tensors.get(entry.name)
        if tensor is None:
            continue  # the check at initialize names it
        where = f"{kind} '{entry.name}' ({kind}[{index}]"
        if entry.data_type == pb.TYPE_INVALID:
            if tensor.datatype is None:
                raise ConfigError(
                    model, f"{where}.data_type): the engine's type {tensor.trt_dtype} has no Triton datatype"
                )
            entry.data_type = pb.DataType.Value(datatype_to_config_type(tensor.datatype))
        if tensor.is_shape_tensor:
            entry.is_shape_tensor = True
        if not entry.dims and not entry.HasField("reshape"):
            strip = batching and not tensor.is_shape_tensor
            dims = list(tensor.shape[1:] if strip else tensor.shape)
            if dims:
                entry.dims.extend(dims)
            else:
                entry.dims.append(1)
                entry.reshape.SetInParent()
