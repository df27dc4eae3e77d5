"""Triton's check of an ensemble's wiring as the config alone shows it: every ensemble
input is read, every ensemble output is written from the inputs, no tensor is written twice
or left unread.

It needs no step model, so a load runs it with the other config checks, before any file is
looked at; `ensemble_validation` checks the wiring against the step models' configs later.
Messages carry Triton's wording (clients and scripts match on them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protos import model_config_pb2 as pb

__all__ = ["ensemble_graph_problem"]


@dataclass(eq=False)
class _Tensor:
    name: str
    written: bool = False
    ready: bool = False
    # The tensors a step reads to write this one, and the tensors written from this one.
    sources: list[_Tensor] = field(default_factory=list)
    readers: list[_Tensor] = field(default_factory=list)


def ensemble_graph_problem(proto: pb.ModelConfig, name: str) -> str | None:
    """What Triton would refuse in the wiring of ensemble `name`, or None."""
    tensors: dict[str, _Tensor] = {}
    for index, step in enumerate(proto.ensemble_scheduling.step):
        written = []
        for tensor_name in step.output_map.values():
            tensor = tensors.setdefault(tensor_name, _Tensor(tensor_name))
            if tensor.written:
                return (
                    f"ensemble tensor '{tensor_name}' can appear in an output map only once for ensemble "
                    f"'{name}' step {index}"
                )
            tensor.written = True
            written.append(tensor)
        for tensor_name in step.input_map.values():
            read = tensors.setdefault(tensor_name, _Tensor(tensor_name))
            for output in written:
                output.sources.append(read)
                read.readers.append(output)

    queue = []
    for item in proto.input:
        if item.name not in tensors:
            return f"ensemble input '{item.name}' for ensemble {name}' is not used"
        tensors[item.name].ready = True
        queue.append(tensors[item.name])
    while queue:
        for reader in queue.pop(0).readers:
            if not reader.ready and all(source.ready for source in reader.sources):
                reader.ready = True
                queue.append(reader)

    outputs = set()
    for declared in proto.output:
        if declared.name not in tensors:
            return f"ensemble output '{declared.name}' for ensemble {name}' is not used"
        if not tensors[declared.name].ready:
            return _not_written(tensors[declared.name], name)
        outputs.add(declared.name)
    for tensor in tensors.values():
        if tensor.name not in outputs and (not tensor.ready or not tensor.readers):
            return f"ensemble tensor '{tensor.name}' is unused in ensemble '{name}'"
    return None


def _not_written(output: _Tensor, name: str) -> str:
    """Name the first tensor up the chain that nothing connects, as Triton does."""
    message = f"output '{output.name}' for ensemble '{name}' is not written"
    last, sources, seen = output, output.sources, set()
    while sources:
        following = None
        for source in sources:
            if not source.ready and source.name not in seen:
                seen.add(source.name)
                last, following = source, source.sources
                break
        sources = following or []
    if last is not output:
        message += f": at least one of its depending tensors, '{last.name}', is not connected"
    return message
