"""The load-time check of a TensorRT model's config against its engine: every tensor the
config lists exists in the engine with the same datatype, shape and shape-tensor kind, and
the batch size fits the engine's optimization profiles."""

from __future__ import annotations

from naiad.backend import ConfigError, ModelConfig, TensorSpec
from naiad.backend.helpers import check_model_shape, datatype_to_config_type

from .engine_description import EngineDescription, EngineTensor

__all__ = ["check_config_against_engine"]


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
