"""Implicit state: tensors a sequence model hands to itself from one request to the next.

`sequence_batching { state [{ input_name output_name data_type dims initial_state }] }`
declares pairs: before each execution the batcher feeds the sequence's current value as
input `input_name`; after it, the model's output `output_name` becomes the new value.
A sequence's first request (and every request with the START flag) gets the initial
value: `initial_state` (zeros, or a file's raw row-major bytes from the model's
`initial_state/` directory), else zeros of `dims` with every variable dim 1 (Triton leaves
that tensor uninitialized; zeros are one such value). State
outputs are not returned to the client unless the config also lists them as outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config.model_config import ConfigError, ModelConfig
from ..datatypes import config_type_to_datatype, deserialize_bytes_tensor, numpy_dtype
from ..inference import InferenceResponse
from ..protos import model_config_pb2 as pb
from ..tensor import Tensor

__all__ = ["ImplicitState", "StateValues"]

# The current state tensors of one sequence, by input name.
StateValues = dict[str, Tensor]


@dataclass(frozen=True, slots=True)
class _StateSpec:
    input_name: str
    output_name: str
    datatype: str
    initial: np.ndarray  # without the batch dimension


class ImplicitState:
    def __init__(self, config: ModelConfig, model_dirs: list[Path]) -> None:
        self.batched = config.max_batch_size > 0
        self._specs = [_parse_state(config.name, state, model_dirs) for state in config.proto.sequence_batching.state]
        self._declared_outputs = set(config.output_by_name)
        self._by_output = {spec.output_name: spec for spec in self._specs}

    def __bool__(self) -> bool:
        return bool(self._specs)

    def initial(self) -> StateValues:
        return {spec.input_name: self._tensor(spec.input_name, spec.datatype, spec.initial) for spec in self._specs}

    def _tensor(self, name: str, datatype: str, value: np.ndarray) -> Tensor:
        data = value[np.newaxis, ...] if self.batched else value
        return Tensor(name, datatype, tuple(data.shape), data)

    def inputs(self, values: StateValues) -> list[Tensor]:
        """The state input tensors to add to a request (fresh objects: models may not
        share them across requests)."""
        return [Tensor(t.name, t.datatype, t.shape, t.data) for t in values.values()]

    def capture(self, response: InferenceResponse, values: StateValues) -> None:
        """Keep the state outputs of `response` as the sequence's next values, and take
        them out of what the client sees unless the config declares them as outputs."""
        if not self._specs or response.error is not None:
            return
        kept = []
        for tensor in response.outputs:
            spec = self._by_output.get(tensor.name)
            if spec is not None:
                values[spec.input_name] = Tensor(spec.input_name, spec.datatype, tuple(tensor.data.shape), tensor.data)
                if tensor.name not in self._declared_outputs:
                    continue
            kept.append(tensor)
        response.outputs = kept


def _parse_state(model: str, state: pb.ModelSequenceBatching.State, model_dirs: list[Path]) -> _StateSpec:
    datatype = config_type_to_datatype(pb.DataType.Name(state.data_type))
    where = f"sequence_batching.state '{state.input_name}'"
    if len(state.initial_state) > 1:
        raise ConfigError(
            model, f"{where}.initial_state: at most one initial state per state, got {len(state.initial_state)}"
        )
    dtype = numpy_dtype(datatype)
    if not state.initial_state:
        # As in Triton, a variable dim is 1 in the starting request's state.
        shape = tuple(1 if d < 0 else d for d in state.dims)
        initial = np.zeros(shape, dtype=dtype) if datatype != "BYTES" else np.full(shape, b"", dtype=object)
        return _StateSpec(state.input_name, state.output_name, datatype, initial)
    init = state.initial_state[0]
    if init.data_type and init.data_type != state.data_type:
        raise ConfigError(model, f"{where}.initial_state.data_type: must match the state's data_type")
    shape = tuple(init.dims)
    if any(d < 0 for d in shape):
        raise ConfigError(model, f"{where}.initial_state.dims: must be fixed sizes, got {list(shape)}")
    if init.WhichOneof("state_data") == "data_file":
        initial = _read_initial_file(model, where, init.data_file, datatype, shape, model_dirs)
    else:
        initial = np.zeros(shape, dtype=dtype) if datatype != "BYTES" else np.full(shape, b"", dtype=object)
    return _StateSpec(state.input_name, state.output_name, datatype, initial)


def _read_initial_file(
    model: str, where: str, filename: str, datatype: str, shape: tuple[int, ...], model_dirs: list[Path]
) -> np.ndarray:
    for directory in model_dirs:
        path = directory / "initial_state" / filename
        if path.is_file():
            raw = path.read_bytes()
            count = int(np.prod(shape)) if shape else 1
            try:
                if datatype == "BYTES":
                    return deserialize_bytes_tensor(raw).reshape(shape)
                return np.frombuffer(raw, dtype=numpy_dtype(datatype), count=count).reshape(shape).copy()
            except ValueError as exc:
                raise ConfigError(model, f"{where}.initial_state.data_file '{path}': {exc}") from None
    looked = ", ".join(str(d / "initial_state" / filename) for d in model_dirs)
    raise ConfigError(model, f"{where}.initial_state.data_file: '{filename}' not found (looked in {looked})")
