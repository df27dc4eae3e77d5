"""Shared steps of config auto-complete for framework backends: declare the tensors a
model file has when the config lists none, and fill each declared tensor's datatype and
dims from the model.

Dims are the model's shape without the batch dimension (for batching models), variable
dimensions as -1; a tensor left with no dims becomes `dims: [1]` with `reshape: { shape: [] }`,
as Triton writes scalars. What the config already says is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from ..datatypes import datatype_to_config_type
from ..protos import model_config_pb2 as pb

__all__ = ["SignatureTensor", "complete_tensors"]


class SignatureTensor(Protocol):
    """A tensor as a model file declares it: `datatype` None when it has no Triton
    datatype (sequences, maps), `shape` with -1 for variable dimensions."""

    @property
    def name(self) -> str: ...

    @property
    def datatype(self) -> str | None: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


def complete_tensors(
    proto: pb.ModelConfig, inputs: Sequence[SignatureTensor], outputs: Sequence[SignatureTensor], batching: bool
) -> None:
    """Fill `proto.input` / `proto.output` in place from the model's tensors."""
    for declared, found_list in ((proto.input, inputs), (proto.output, outputs)):
        if not declared:
            # Tensors without a Triton datatype are left out: the model runs without them.
            for signature in found_list:
                if signature.datatype is not None:
                    declared.add(name=signature.name)
        by_name = {t.name: t for t in found_list}
        for tensor in declared:
            found = by_name.get(tensor.name)
            if found is not None:
                _fill(tensor, found, batching)


def _fill(tensor: pb.ModelInput | pb.ModelOutput, found: SignatureTensor, batching: bool) -> None:
    if tensor.data_type == pb.TYPE_INVALID and found.datatype is not None:
        # An enum value is its number at run time; the stubs type Value() as a plain int.
        tensor.data_type = cast(pb.DataType, pb.DataType.Value(datatype_to_config_type(found.datatype)))
    if not tensor.dims and not tensor.HasField("reshape"):
        dims = list(found.shape[1:] if batching else found.shape)
        if dims:
            tensor.dims.extend(dims)
        else:
            tensor.dims.append(1)
            tensor.reshape.SetInParent()
