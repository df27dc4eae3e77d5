"""Describes a frozen GraphDef's inputs and outputs. A GraphDef carries no signature, so
configs name graph tensors directly (`x`, or `x:0` for an operation's first output);
this module looks those names up and lists what the graph offers for error messages."""

from __future__ import annotations

from typing import Any

from naiad.backend import ConfigError, ModelConfig
from naiad.backend.helpers import model_inputs, model_outputs

from .dtypes import datatype_of_tf
from .model_tensors import ModelSignature, ModelTensor

__all__ = ["graphdef_signature", "tensor_name_of", "unfed_placeholders", "require_graph_inputs"]

_PLACEHOLDERS = ("Placeholder", "PlaceholderWithDefault")


def tensor_name_of(name: str) -> str:
    """`x` -> `x:0`; `x:1` stays."""
    head, sep, tail = name.rpartition(":")
    return name if sep and tail.isdigit() and head else f"{name}:0"


def _describe(graph: Any, key: str) -> ModelTensor | None:
    try:
        tensor = graph.get_tensor_by_name(tensor_name_of(key))
    except (KeyError, ValueError):
        return None
    tf_dtype = tensor.dtype.base_dtype.as_datatype_enum
    from tensorflow.core.framework import types_pb2

    dtype_name = types_pb2.DataType.Name(tf_dtype)
    dims = tensor.shape.as_list() if tensor.shape.rank is not None else None
    shape = None if dims is None else tuple(-1 if d is None else int(d) for d in dims)
    return ModelTensor(key, tensor.name, dtype_name, datatype_of_tf(dtype_name), shape)


def graphdef_signature(graph: Any, config: ModelConfig) -> ModelSignature:
    """The configured names that exist in the graph, plus (so a wrong name's message can
    list the right ones) every placeholder as an input and every operation whose output
    nothing consumes as an output."""
    inputs: dict[str, ModelTensor] = {}
    outputs: dict[str, ModelTensor] = {}
    operations = graph.get_operations()
    consumed = {t.op.name for op in operations for t in op.inputs}
    for op in operations:
        if op.type in _PLACEHOLDERS and op.outputs:
            inputs[op.name] = _describe(graph, op.name)  # type: ignore[assignment]
        elif op.outputs and op.name not in consumed and op.type != "NoOp":
            outputs[op.name] = _describe(graph, op.name)  # type: ignore[assignment]
    for spec in model_inputs(config):
        found = _describe(graph, spec.name)
        if found is not None:
            inputs[spec.name] = found
    for spec in model_outputs(config):
        found = _describe(graph, spec.name)
        if found is not None:
            outputs[spec.name] = found
    return ModelSignature(inputs, outputs)


def unfed_placeholders(graph: Any, config: ModelConfig) -> list[str]:
    """Placeholders without a default that no config input feeds: every run would fail."""
    fed = {tensor_name_of(spec.name) for spec in model_inputs(config)}
    return sorted(op.name for op in graph.get_operations() if op.type == "Placeholder" and f"{op.name}:0" not in fed)


def require_graph_inputs(graph: Any, config: ModelConfig) -> None:
    missing = unfed_placeholders(graph, config)
    if missing:
        raise ConfigError(config.name, f"input: the GraphDef has placeholder(s) {missing} that no config input feeds")
