"""The control inputs a sequence batcher injects into every request it executes.

A model declares them under `sequence_batching { control_input [...] }`: each names an
input tensor and one control. START, END and READY carry a flag, written as the
configured false/true pair (`int32_false_true`, `fp32_false_true` or `bool_false_true`,
which also pick the tensor's datatype); CORRID carries the sequence's correlation id in
`data_type` (an integer type, or TYPE_STRING for string ids, a BYTES tensor). Each control tensor holds
one element per inference: shape [1], or [1, 1] with the batch dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..datatypes import config_type_to_datatype, numpy_dtype
from ..errors import NaiadError
from ..protos import model_config_pb2 as pb
from ..tensor import Tensor
from .model_config import ConfigError, ModelConfig

__all__ = ["SequenceControls", "Control"]

_Kind = pb.ModelSequenceBatching.Control
_CORRID_TYPES = ("UINT64", "INT64", "UINT32", "INT32", "BYTES")


@dataclass(frozen=True, slots=True)
class Control:
    input_name: str
    kind: str  # "START", "END", "READY" or "CORRID"
    datatype: str
    false_true: tuple[Any, Any] = (0, 1)


class SequenceControls:
    """Builds the control tensors of one request from its sequence flags."""

    def __init__(self, config: ModelConfig) -> None:
        self.model_name = config.name
        self.batched = config.max_batch_size > 0
        self.controls: list[Control] = [
            _parse_control(config.name, index, control_input)
            for index, control_input in enumerate(config.proto.sequence_batching.control_input)
        ]
        corrid = [c for c in self.controls if c.kind == "CORRID"]
        self.corrid_datatype = corrid[0].datatype if corrid else None

    def check_correlation_id(self, correlation_id: int | str) -> None:
        """A string id for a model whose CORRID input is numeric (or the reverse) cannot
        be passed on; say so instead of failing inside the model."""
        kind = self.corrid_datatype
        if kind is None:
            return
        if kind == "BYTES":
            if not isinstance(correlation_id, str):
                raise NaiadError.invalid(
                    f"model '{self.model_name}' takes string correlation IDs (its CORRID control is TYPE_STRING), "
                    f"got the integer {correlation_id}"
                )
        elif not isinstance(correlation_id, int):
            raise NaiadError.invalid(
                f"model '{self.model_name}' takes integer correlation IDs (its CORRID control is TYPE_{kind}), "
                f"got the string '{correlation_id}'"
            )
        else:
            limits = np.iinfo(numpy_dtype(kind))
            if not limits.min <= correlation_id <= limits.max:
                raise NaiadError.invalid(
                    f"correlation ID {correlation_id} does not fit model '{self.model_name}''s CORRID control "
                    f"(TYPE_{kind}, {limits.min}..{limits.max})"
                )

    def tensors(self, start: bool, end: bool, ready: bool, correlation_id: int | str) -> list[Tensor]:
        flags = {"START": start, "END": end, "READY": ready}
        tensors = []
        for control in self.controls:
            if control.kind == "CORRID":
                value: Any = correlation_id
                if control.datatype == "BYTES":
                    value = str(value).encode() if value else b""
            else:
                value = control.false_true[1 if flags[control.kind] else 0]
            dtype = numpy_dtype(control.datatype)
            shape = (1, 1) if self.batched else (1,)
            data = np.full(shape, value, dtype=dtype)
            tensors.append(Tensor(control.input_name, control.datatype, shape, data))
        return tensors

    def null_correlation_id(self) -> int | str:
        return "" if self.corrid_datatype == "BYTES" else 0


def _parse_control(model: str, index: int, control_input: pb.ModelSequenceBatching.ControlInput) -> Control:
    where = f"sequence_batching.control_input[{index}] '{control_input.name}'"
    if len(control_input.control) != 1:
        raise ConfigError(model, f"{where}: needs exactly one control, has {len(control_input.control)}")
    control = control_input.control[0]
    kind = _Kind.Kind.Name(control.kind).removeprefix("CONTROL_SEQUENCE_")
    if kind == "CORRID":
        datatype = config_type_to_datatype(pb.DataType.Name(control.data_type)) if control.data_type else ""
        if datatype not in _CORRID_TYPES:
            raise ConfigError(
                model,
                f"{where}: CONTROL_SEQUENCE_CORRID needs data_type TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                "TYPE_INT32 or TYPE_STRING",
            )
        return Control(control_input.name, kind, datatype)
    pairs = [
        ("INT32", tuple(control.int32_false_true)),
        ("FP32", tuple(control.fp32_false_true)),
        ("BOOL", tuple(control.bool_false_true)),
    ]
    given = [(datatype, values) for datatype, values in pairs if values]
    if len(given) != 1 or len(given[0][1]) != 2:
        raise ConfigError(
            model,
            f"{where}: CONTROL_SEQUENCE_{kind} needs exactly one of int32_false_true, fp32_false_true "
            "or bool_false_true, with two values (false, true)",
        )
    datatype, values = given[0]
    return Control(control_input.name, kind, datatype, (values[0], values[1]))
