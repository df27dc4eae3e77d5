"""Fills a config from an exported program (`model.pt2`): inputs named after forward's
arguments, outputs after the keys of a dict result or `OUTPUT__<i>` for tensors and tuples,
datatypes and dims from the program's tensor metadata (dynamic dimensions as -1).

A program whose every input and output has a dynamic first dimension batches: it gets the
backend's default max_batch_size and, with no scheduler chosen, `dynamic_batching {}`.
TorchScript files carry no such metadata, so their configs must declare inputs and outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from naiad.backend.helpers import complete_tensors
from naiad.backend.helpers import model_config_pb2 as pb

from .dtypes import datatype_of_dtype

__all__ = ["ProgramTensor", "program_signature", "auto_complete"]


@dataclass(frozen=True, slots=True)
class ProgramTensor:
    name: str
    datatype: str | None
    shape: tuple[int, ...]
    # torch's name of the dtype (`torch.complex64`), for messages.
    native_type: str = ""


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else -1 for d in value.shape)


def _output_names(program: Any, count: int) -> list[str]:
    spec = program.call_spec.out_spec
    if spec is not None and getattr(spec, "type", None) is dict and spec.context:
        return [str(key) for key in spec.context]
    return [f"OUTPUT__{i}" for i in range(count)]


def program_signature(program: Any, arg_names: list[str]) -> tuple[list[ProgramTensor], list[ProgramTensor]]:
    """The user-visible tensor inputs and outputs of an ExportedProgram."""
    user_inputs = list(program.graph_signature.user_inputs)
    nodes = {node.name: node for node in program.graph.nodes}
    inputs: list[ProgramTensor] = []
    for index, placeholder in enumerate(user_inputs):
        value = nodes[placeholder].meta.get("val") if placeholder in nodes else None
        if not isinstance(value, torch.Tensor):
            continue
        name = arg_names[index] if index < len(arg_names) else placeholder
        inputs.append(ProgramTensor(name, datatype_of_dtype(value.dtype), _shape(value), str(value.dtype)))
    output_node = next(node for node in program.graph.nodes if node.op == "output")
    results = output_node.args[0]
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    # Outputs the program returns to the user are the last len(user_outputs) results.
    user_results = results[len(results) - len(program.graph_signature.user_outputs) :]
    names = _output_names(program, len(user_results))
    outputs: list[ProgramTensor] = []
    for name, node in zip(names, user_results):
        value = getattr(node, "meta", {}).get("val")
        if isinstance(value, torch.Tensor):
            outputs.append(ProgramTensor(name, datatype_of_dtype(value.dtype), _shape(value), str(value.dtype)))
    return inputs, outputs


def auto_complete(
    proto: pb.ModelConfig, inputs: list[ProgramTensor], outputs: list[ProgramTensor], default_max_batch_size: int
) -> None:
    tensors = inputs + outputs
    batches = bool(tensors) and all(len(t.shape) >= 1 and t.shape[0] == -1 for t in tensors)
    if proto.max_batch_size == 0 and default_max_batch_size > 0 and batches and not proto.input and not proto.output:
        proto.max_batch_size = default_max_batch_size
    batching = proto.max_batch_size > 0
    if batching and proto.WhichOneof("scheduling_choice") is None:
        proto.dynamic_batching.SetInParent()
    complete_tensors(proto, inputs, outputs, batching)
