"""Every tensor a framework backend exchanges with its model, not only the config's `input`
and `output` lists.

Triton's framework backends feed a model more than the client's inputs: a sequence
model's control inputs (`sequence_batching.control_input`: START, END, READY, CORRID) and
implicit-state inputs (`sequence_batching.state[].input_name`), and the `batch_input`
tensors the server computes for a batch. They reach the model exactly like config inputs:
by name in ONNX Runtime and TensorFlow, by argument position (`<name>__<index>`) or
argument name in PyTorch. A state's `output_name` is fetched from the model like a
config output, whether or not the config also lists it as one.

Shapes, as the batch helpers build them: a control input holds one element per
inference (dims [1]); a state input has the state's dims; a batch input has no batch
dimension of its own (its dims here are [-1]).
"""

from __future__ import annotations

from ..datatypes import config_type_to_datatype
from ..protos import model_config_pb2 as pb
from .model_config import ModelConfig, TensorSpec
from .sequence_controls import SequenceControls

__all__ = ["model_inputs", "model_outputs"]


def model_inputs(config: ModelConfig) -> list[TensorSpec]:
    """The config's inputs, then control inputs, state inputs and batch inputs, in config
    order. Raises ConfigError for a malformed control input."""
    specs = list(config.inputs)
    sequence = config.proto.sequence_batching
    for control in SequenceControls(config).controls:
        specs.append(TensorSpec(control.input_name, control.datatype, (1,)))
    for state in sequence.state:
        specs.append(TensorSpec(state.input_name, _datatype(state.data_type), tuple(state.dims)))
    for batch_input in config.proto.batch_input:
        for target in batch_input.target_name:
            specs.append(TensorSpec(target, _datatype(batch_input.data_type), (-1,)))
    return _first_of_each_name(specs)


def model_outputs(config: ModelConfig) -> list[TensorSpec]:
    """The config's outputs, then the state outputs the config does not list as outputs."""
    specs = list(config.outputs)
    for state in config.proto.sequence_batching.state:
        specs.append(TensorSpec(state.output_name, _datatype(state.data_type), tuple(state.dims)))
    return _first_of_each_name(specs)


def _datatype(data_type: int) -> str:
    return config_type_to_datatype(pb.DataType.Name(data_type))


def _first_of_each_name(specs: list[TensorSpec]) -> list[TensorSpec]:
    # A state output the config also lists as an output is one tensor, described by the
    # config's output entry.
    seen: set[str] = set()
    unique = []
    for spec in specs:
        if spec.name not in seen:
            seen.add(spec.name)
            unique.append(spec)
    return unique
