"""Auto-complete from an engine and the load-time check of a config against it.

Auto-complete follows the same rules as the other backends: `max_batch_size` 0 becomes
the largest batch the engine's optimization profiles accept when every IO tensor has a
dynamic first dimension (unless the config lists a tensor with the engine's full rank);
unlisted inputs/outputs are added; listed ones get missing types and dims.
"""

from __future__ import annotations

from naiad.backend import (
    ConfigError,
    ModelConfig,
    TensorSpec,
    check_model_shape,
    datatype_to_config_type,
    model_config_pb2 as pb,
)

from .engine_description import EngineDescription, EngineTensor

__all__ = ["auto_complete_from_engine", "check_config_against_engine", "PLATFORM"]

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
                raise ConfigError(model, f"{where}.data_type): the engine's type {tensor.trt_dtype} has no Triton datatype")
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


def check_config_against_engine(
    config: ModelConfig, engine: EngineDescription, model: str, profiles: list[int] | None = None
) -> None:
    """Raise ConfigError naming the first mismatch between config and engine."""
    batching = config.max_batch_size > 0
    for kind, specs, is_input in (("input", config.inputs, True), ("output", config.outputs, False)):
        for index, spec in enumerate(specs):
            where = f"{kind} '{spec.name}' ({kind}[{index}]"
            tensor = engine.by_name.get(spec.name)
            if tensor is None or tensor.is_input != is_input:
                names = ", ".join(t.name for t in (engine.inputs if is_input else engine.outputs)) or "none"
                raise ConfigError(model, f"{where}.name): the engine has no {kind} '{spec.name}' ({kind}s: {names})")
            _check_tensor(model, where, spec, tensor, batching)
    missing = [t.name for t in engine.inputs if t.name not in config.input_by_name]
    if missing:
        raise ConfigError(model, f"input: the engine needs input(s) {missing} that the config does not list")
    if batching:
        capacity = engine.batch_capacity(profiles)
        if config.max_batch_size > capacity:
            raise ConfigError(
                model,
                f"max_batch_size: {config.max_batch_size} is more than the engine's optimization profiles "
                f"{'' if profiles is None else profiles} accept as a first dimension ({capacity})",
            )


def _check_tensor(model: str, where: str, spec: TensorSpec, tensor: EngineTensor, batching: bool) -> None:
    if tensor.datatype is None:
        raise ConfigError(model, f"{where}.data_type): the engine's type {tensor.trt_dtype} has no Triton datatype")
    if spec.datatype != tensor.datatype:
        raise ConfigError(
            model,
            f"{where}.data_type): the config says {datatype_to_config_type(spec.datatype)}, the engine has "
            f"{tensor.trt_dtype} ({datatype_to_config_type(tensor.datatype)})",
        )
    if spec.is_shape_tensor != tensor.is_shape_tensor:
        says = "is" if tensor.is_shape_tensor else "is not"
        raise ConfigError(model, f"{where}.is_shape_tensor): the engine's '{tensor.name}' {says} a shape tensor")
    batched = batching and not tensor.is_shape_tensor
    check_model_shape(model, where, spec, list(tensor.shape), batched, "engine")
