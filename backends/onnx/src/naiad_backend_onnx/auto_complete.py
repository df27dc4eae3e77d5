"""Fills a config's inputs, outputs and max_batch_size from an ONNX model, as Triton's
onnxruntime backend does when auto-complete is on.

Only a config that leaves its inputs or its outputs out is completed. A model batches when
every input and output has a variable first dimension; such a model gets `max_batch_size` = the backend's `default-max-batch-size` (4 unless configured) and,
when the config picks no scheduler, `dynamic_batching {}`. Dims are the model's shape
without the batch dimension, variable dimensions as -1; a tensor left with no dims becomes
`dims: [1]` with `reshape: { shape: [] }`.
"""

from __future__ import annotations

from dataclasses import dataclass

from naiad.backend import ConfigError
from naiad.backend.helpers import complete_tensors
from naiad.backend.helpers import model_config_pb2 as pb

from .dtypes import datatype_of_ort_type

__all__ = ["ModelTensor", "auto_complete", "model_supports_batching"]


@dataclass(frozen=True, slots=True)
class ModelTensor:
    """An input or output as the ONNX model declares it; variable dimensions are -1."""

    name: str
    ort_type: str
    shape: tuple[int, ...]

    @property
    def datatype(self) -> str | None:
        return datatype_of_ort_type(self.ort_type)

    @property
    def native_type(self) -> str:
        return self.ort_type

    @classmethod
    def from_node_arg(cls, arg: object) -> ModelTensor:
        shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (getattr(arg, "shape", None) or []))
        return cls(arg.name, arg.type, shape)


def model_supports_batching(inputs: list[ModelTensor], outputs: list[ModelTensor]) -> bool:
    tensors = inputs + outputs
    return bool(tensors) and all(len(t.shape) >= 1 and t.shape[0] == -1 for t in tensors)


def _declared_dims_imply_batching(proto: pb.ModelConfig, model: dict[str, ModelTensor]) -> bool | None:
    """True/False when the config's own dims say whether the batch dimension is left out;
    None when the config declares no dims to judge by."""
    verdict: bool | None = None
    for tensor in list(proto.input) + list(proto.output):
        found = model.get(tensor.name)
        if found is None or not tensor.dims or tensor.HasField("reshape"):
            continue
        if len(tensor.dims) == len(found.shape):
            return False
        if len(tensor.dims) == len(found.shape) - 1:
            verdict = True
    return verdict


def auto_complete(
    proto: pb.ModelConfig, inputs: list[ModelTensor], outputs: list[ModelTensor], default_max_batch_size: int
) -> None:
    """Fill `proto` in place; what the config already says is kept. A config that lists
    inputs (or batch inputs) and outputs is left as it is, as Triton's backend leaves it."""
    if (proto.input or proto.batch_input) and proto.output:
        return
    everything = {t.name: t for t in inputs + outputs}
    if proto.max_batch_size > 0 and not model_supports_batching(inputs, outputs):
        # Triton's words.
        raise ConfigError(
            proto.name,
            f"autofill failed for model '{proto.name}': model does not support batching while non-zero "
            "max_batch_size is specified",
        )
    if proto.max_batch_size == 0 and default_max_batch_size > 0 and model_supports_batching(inputs, outputs):
        declared = _declared_dims_imply_batching(proto, everything)
        if declared is None or declared:
            proto.max_batch_size = default_max_batch_size
    batching = proto.max_batch_size > 0
    if batching and proto.WhichOneof("scheduling_choice") is None:
        proto.dynamic_batching.SetInParent()

    complete_tensors(proto, inputs, outputs, batching)
