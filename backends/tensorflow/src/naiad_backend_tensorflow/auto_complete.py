"""Fills a config in from a SavedModel signature, following Triton's rules:

* `max_batch_size` 0 (or left out) becomes `default-max-batch-size` (4) when every input
  and output has a variable first dimension, unless the config already lists a tensor
  with the model's full rank (its author chose not to batch).
* No inputs (outputs) listed: every signature input (output) with a Triton datatype is
  added, in key order. Listed ones get their missing `data_type` and `dims` filled in;
  others are left out (`complete_tensors`, the steps every framework backend shares).
* A tensor with no dimensions beyond the batch gets `dims: [1]` and `reshape: { shape: [] }`.
* A batching model with no scheduler gets the dynamic batcher with default settings.
"""

from __future__ import annotations

from naiad.backend import ModelConfig
from naiad.backend.helpers import complete_tensors
from naiad.backend.helpers import model_config_pb2 as pb

from .model_tensors import ModelSignature

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
    inputs = [signature.inputs[key] for key in sorted(signature.inputs)]
    outputs = [signature.outputs[key] for key in sorted(signature.outputs)]
    complete_tensors(proto, inputs, outputs, batching, model=model, source="model")
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
