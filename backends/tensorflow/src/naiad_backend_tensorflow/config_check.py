"""Checks a validated config against the model's own inputs and outputs at load, so a
mismatch is a load error naming the tensor, not a failure on the first request."""

from __future__ import annotations

from naiad.backend import ConfigError, ModelConfig, TensorSpec
from naiad.backend.helpers import check_model_shape, datatype_to_config_type, model_inputs, model_outputs

from .model_tensors import ModelSignature, ModelTensor

__all__ = ["check_config_against_model"]


def check_config_against_model(
    config: ModelConfig, signature: ModelSignature, source: str, require_every_input: bool
) -> None:
    """`source` names the model's description in messages ("SavedModel signature
    'serving_default'", "GraphDef"). `require_every_input` refuses configs that leave a
    model input out (a signature's inputs must all be fed; a graph may have defaults)."""
    batching = config.max_batch_size > 0
    for kind, specs, tensors in (
        ("input", config.inputs, signature.inputs),
        ("output", config.outputs, signature.outputs),
    ):
        for index, spec in enumerate(specs):
            where = f"{kind} '{spec.name}' ({kind}[{index}]"
            tensor = tensors.get(spec.name)
            if tensor is None:
                known = ", ".join(sorted(tensors)) or "none"
                raise ConfigError(
                    config.name, f"{where}.name): the {source} has no {kind} '{spec.name}' ({kind}s: {known})"
                )
            _check_tensor(config.name, where, spec, tensor, batching, source)
    # Sequence controls, implicit state and batch inputs: fed and fetched by name too.
    fed = model_inputs(config)
    for kind, specs, tensors, listed in (
        ("input", fed, signature.inputs, config.input_by_name),
        ("output", model_outputs(config), signature.outputs, config.output_by_name),
    ):
        for spec in (spec for spec in specs if spec.name not in listed):
            tensor = tensors.get(spec.name)
            if tensor is None:
                known = ", ".join(sorted(tensors)) or "none"
                raise ConfigError(
                    config.name,
                    f"{kind} '{spec.name}' (a sequence control, state or batch input of the config): the {source} "
                    f"has no such {kind} ({kind}s: {known})",
                )
            if tensor.datatype is not None and tensor.datatype != spec.datatype:
                raise ConfigError(
                    config.name,
                    f"{kind} '{spec.name}': the config makes it {datatype_to_config_type(spec.datatype)}, the "
                    f"{source} has {tensor.tf_dtype} ({datatype_to_config_type(tensor.datatype)})",
                )
    if require_every_input:
        missing = sorted(set(signature.inputs) - {spec.name for spec in fed})
        if missing:
            raise ConfigError(
                config.name, f"input: the {source} needs input(s) {missing} that the config does not list"
            )


def _check_tensor(model: str, where: str, spec: TensorSpec, tensor: ModelTensor, batching: bool, source: str) -> None:
    if not tensor.tensor_name:
        raise ConfigError(model, f"{where}): '{tensor.key}' is a sparse or ragged tensor, which naiad cannot feed")
    if tensor.datatype is None:
        raise ConfigError(model, f"{where}.data_type): the model's dtype {tensor.tf_dtype} has no Triton datatype")
    if tensor.datatype != spec.datatype:
        raise ConfigError(
            model,
            f"{where}.data_type): the config says {datatype_to_config_type(spec.datatype)}, "
            f"the {source} has {tensor.tf_dtype} ({datatype_to_config_type(tensor.datatype)})",
        )
    if tensor.shape is None:
        return
    check_model_shape(model, where, spec, list(tensor.shape), batching, source)
