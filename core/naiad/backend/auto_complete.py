"""Shared steps of config auto-complete for framework backends: declare the tensors a
model file has when the config lists none, and fill each declared tensor's datatype and
dims from the model. Every framework backend completes its tensors here, so they follow one
rule: outputs that clients could not receive (no Triton datatype) are left out; such an
input, or a tensor whose rank the model leaves open, is a ConfigError naming it.

Dims are the model's shape without the batch dimension (for batching models; a shape tensor
has none to drop), variable dimensions as -1; a tensor left with no dims becomes `dims: [1]`
with `reshape: { shape: [] }`, as Triton writes scalars. What the config already says is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

from ..config.model_config import ConfigError
from ..datatypes import datatype_to_config_type
from ..protos import model_config_pb2 as pb

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

    _Declared: TypeAlias = (
        RepeatedCompositeFieldContainer[pb.ModelInput] | RepeatedCompositeFieldContainer[pb.ModelOutput]
    )

__all__ = ["SignatureTensor", "complete_tensors"]


class SignatureTensor(Protocol):
    """A tensor as a model file declares it: `datatype` None when it has no Triton
    datatype (sequences, maps; `native_type` names the framework's type for messages),
    `shape` with -1 for variable dimensions, None when the model leaves the rank open."""

    @property
    def name(self) -> str: ...

    @property
    def datatype(self) -> str | None: ...

    @property
    def native_type(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...] | None: ...


def complete_tensors(
    proto: pb.ModelConfig,
    inputs: Sequence[SignatureTensor],
    outputs: Sequence[SignatureTensor],
    batching: bool,
    *,
    model: str = "",
    source: str = "model",
    shape_tensors: Collection[str] = (),
) -> None:
    """Fill `proto.input` / `proto.output` in place from the model's tensors, in the order
    given. `model` names the model and `source` the model file ("SavedModel", "engine") in
    the ConfigError raised for a listed tensor that the model gives no Triton datatype or
    no rank. `shape_tensors` names TensorRT-style shape tensors: marked `is_shape_tensor`,
    their dims keep the first dimension."""
    _complete("input", proto.input, inputs, batching, model, source, shape_tensors)
    _complete("output", proto.output, outputs, batching, model, source, shape_tensors)


def _complete(
    kind: str,
    declared: _Declared,
    found_list: Sequence[SignatureTensor],
    batching: bool,
    model: str,
    source: str,
    shape_tensors: Collection[str],
) -> None:
    if not declared:
        # An output without a Triton datatype is left out: the model runs without fetching
        # it. An input is not: the model cannot run without it, so it is added and refused
        # below, naming its type, rather than failing every request later.
        for signature in found_list:
            if signature.datatype is not None or kind == "input":
                declared.add(name=signature.name)
    by_name = {t.name: t for t in found_list}
    # enumerate typed by hand: inferred, mypy joins the union's items to Message.
    for index, tensor in enumerate[pb.ModelInput | pb.ModelOutput](declared):
        found = by_name.get(tensor.name)
        if found is not None:
            where = f"{kind} '{tensor.name}' ({kind}[{index}]"
            _fill(tensor, found, batching and found.name not in shape_tensors, model, where, source)
            if found.name in shape_tensors:
                tensor.is_shape_tensor = True


def _fill(
    tensor: pb.ModelInput | pb.ModelOutput, found: SignatureTensor, batching: bool, model: str, where: str, source: str
) -> None:
    if tensor.data_type == pb.TYPE_INVALID:
        if found.datatype is None:
            raise ConfigError(
                model, f"{where}.data_type): the {source}'s type {found.native_type} has no Triton datatype"
            )
        # An enum value is its number at run time; the stubs type Value() as a plain int.
        tensor.data_type = cast(pb.DataType, pb.DataType.Value(datatype_to_config_type(found.datatype)))
    if not tensor.dims and not tensor.HasField("reshape"):
        if found.shape is None:
            raise ConfigError(
                model,
                f"{where}.dims): the {source} leaves the rank of '{found.name}' open; list its dims in config.pbtxt",
            )
        dims = list(found.shape[1:] if batching else found.shape)
        if dims:
            tensor.dims.extend(dims)
        else:
            tensor.dims.append(1)
            tensor.reshape.SetInParent()
