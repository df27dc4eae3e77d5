"""Fills a config in from a SavedModel signature, following Triton's rules:

* `max_batch_size` 0 (or left out) becomes `default-max-batch-size` (4) when every input
  and output has a variable first dimension, unless the config already lists a tensor
  with the model's full rank (its author chose not to batch).
* No inputs (outputs) listed: every signature input (output) is added. Listed ones get
  their missing `data_type` and `dims` filled in; others are left out.
* A tensor with no dimensions beyond the batch gets `dims: [1]` and `reshape: { shape: [] }`.
* A batching model with no scheduler gets the dynamic batcher with default settings.
"""

from __future__ import annotations

from naiad.backend import ConfigError, ModelConfig, datatype_to_config_type
from naiad.backend import model_config_pb2 as pb

from .model_tensors import ModelSignature, ModelTensor

__all__ = ["auto_complete_from_signature"]


def auto_complete_from_signature(
    config: ModelConfig, signature: ModelSignature, default_max_batch_size: int, platform: str, model: str
) -> None:
    """Fill `config` in place; `model` names the model in messages."""
    proto = config.proto
    if not proto.platform:
        proto.platform = platform
    if proto.max_batch_size == 0 and default_max_batch_size > 0 and signature.can_batch():
        if not _lists_full_rank_tensor(proto, signature):
            proto.max_batch_size = default_max_batch_size
    batching = proto.max_batch_size > 0
    _complete(model, "input", proto.input, signature.inputs, batching)
    _complete(model, "output", proto.output, signature.outputs, batching)
    if proto.max_batch_size > 1 and proto.WhichOneof("scheduling_choice") is None:
        proto.dynamic_batching.SetInParent()
    config.refresh()


def _lists_full_rank_tensor(proto: pb.ModelConfig, signature: ModelSignature) -> bool:
    for listed, tensors in ((proto.input, signature.inputs), (proto.output, signature.outputs)):
        for tensor in listed:
            found = tensors.get(tensor.name)
            if found is not None and found.shape is not None and tensor.dims and len(tensor.dims) == len(found.shape):
                return True
    return False


def _complete(model: str, kind: str, listed, tensors: dict[str, ModelTensor], batching: bool) -> None:
    if not listed:
        for key in sorted(tensors):
            entry = listed.add()
            entry.name = key
    for index, entry in enumerate(listed):
        tensor = tensors.get(entry.name)
        if tensor is None:
            continue  # the config check at initialize names it
        where = f"{kind} '{entry.name}' ({kind}[{index}]"
        if entry.data_type == pb.TYPE_INVALID:
            if tensor.datatype is None:
                raise ConfigError(
                    model, f"{where}.data_type): the model's dtype {tensor.tf_dtype} has no Triton datatype"
                )
            entry.data_type = pb.DataType.Value(datatype_to_config_type(tensor.datatype))
        if not entry.dims and not entry.HasField("reshape"):
            if tensor.shape is None:
                raise ConfigError(
                    model,
                    f"{where}.dims): the model leaves the rank of '{tensor.key}' open; list its dims in config.pbtxt",
                )
            dims = list(tensor.shape[1:] if batching else tensor.shape)
            if dims:
                entry.dims.extend(dims)
            else:
                entry.dims.append(1)
                entry.reshape.SetInParent()
