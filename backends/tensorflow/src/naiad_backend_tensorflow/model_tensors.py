"""What a TensorFlow model says about its inputs and outputs, in one framework-free form
that auto-complete and the config check share."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelTensor", "ModelSignature"]


@dataclass(frozen=True, slots=True)
class ModelTensor:
    """One input or output.

    `key` is the name configs use (the signature key of a SavedModel, the tensor name of a
    GraphDef); `tensor_name` the graph tensor fed or fetched (`serving_default_x:0`).
    `datatype` is None for a dtype Triton cannot carry (`tf_dtype` names it). `shape` is
    None when the model leaves the rank open; -1 marks a variable dimension.
    """

    key: str
    tensor_name: str
    tf_dtype: str
    datatype: str | None
    shape: tuple[int, ...] | None

    @property
    def name(self) -> str:
        """The name configs use (auto-complete's `SignatureTensor`)."""
        return self.key

    @property
    def native_type(self) -> str:
        return self.tf_dtype


@dataclass(frozen=True, slots=True)
class ModelSignature:
    """A model's inputs and outputs, by key."""

    inputs: dict[str, ModelTensor]
    outputs: dict[str, ModelTensor]

    def can_batch(self) -> bool:
        """Whether every input and output has a variable first dimension, which is what
        lets requests be stacked along it."""
        tensors = list(self.inputs.values()) + list(self.outputs.values())
        return bool(tensors) and all(t.shape is not None and len(t.shape) >= 1 and t.shape[0] == -1 for t in tensors)
