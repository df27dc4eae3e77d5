"""Checks an ensemble's wiring at load and turns it into an `EnsemblePlan` the ensemble
scheduler runs.

An ensemble is a graph: ensemble inputs and step outputs produce named ensemble tensors,
step inputs and ensemble outputs consume them. Every fault is refused with a message that
names the ensemble, the step and the tensor, e.g.
``ensemble 'pipeline', step 1 (model 'classify'), tensor 'features': data type TYPE_FP32 ...``.

The rules follow Triton's: connected tensors agree in data type and shape (a batching and
a non-batching model may share a tensor when their full shapes agree), every step input is
mapped, nothing is produced twice, no cycles (also through ensembles of ensembles), every
ensemble input is read and every output produced, and a step may not mix tensors that
descend from different decoupled steps, because their responses could not be paired.
Stricter than Triton: a step output mapped to an ensemble tensor that nothing reads is an
error, not silently computed and thrown away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import ErrorCode, NaiadError
from ..protos import model_config_pb2 as pb
from .model_config import ModelConfig

__all__ = [
    "EnsembleStep",
    "EnsemblePlan",
    "StepConfigLookup",
    "validate_ensemble",
    "step_model_names",
    "find_ensemble_cycle",
    "describe_ensemble_cycle",
    "load_order",
]

# Returns the config of a step model at a version (-1: the latest loaded), or raises
# NaiadError saying why it is not there.
StepConfigLookup = Callable[[str, int], ModelConfig]


@dataclass(frozen=True, slots=True)
class EnsembleStep:
    """One step: which model runs, and how its tensors map onto ensemble tensors.

    `inputs` maps the step model's input names to the ensemble tensors they read,
    `outputs` its output names to the ensemble tensors they write. `lineage` is 0 for
    tensors that descend from the ensemble request only, else the index + 1 of the nearest
    decoupled step upstream: a step runs once per value of its lineage.
    """

    index: int
    model_name: str
    model_version: int
    inputs: dict[str, str]
    outputs: dict[str, str]
    decoupled: bool
    batching: bool
    input_dims: dict[str, tuple[int, ...]]
    lineage: int = 0

    @property
    def label(self) -> str:
        return f"step {self.index} (model '{self.model_name}')"

    @property
    def version_text(self) -> str:
        """The version as a request names it ("" for the latest)."""
        return "" if self.model_version in (-1, 0) else str(self.model_version)

    @property
    def output_lineage(self) -> int:
        return self.index + 1 if self.decoupled else self.lineage


@dataclass(frozen=True, slots=True)
class EnsemblePlan:
    """A validated ensemble: its steps and which step produces and reads each tensor."""

    name: str
    steps: tuple[EnsembleStep, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    producer: dict[str, int]
    consumers: dict[str, tuple[int, ...]]
    output_lineage: int
    decoupled: bool
    max_inflight_requests: int = 0
    lineage_of: dict[str, int] = field(default_factory=dict)
    # The label file lines of the step output that produces each ensemble output (where
    # it has a label file): classification through the ensemble uses them, as in Triton.
    output_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def steps_needed(self, requested: Iterable[str]) -> frozenset[int]:
        """The steps that lead to the requested outputs; the others are skipped, as
        Triton prunes an ensemble when a request asks for only some outputs."""
        needed: set[int] = set()
        pending = [t for t in requested if t in self.producer]
        while pending:
            tensor = pending.pop()
            index = self.producer[tensor]
            if index in needed:
                continue
            needed.add(index)
            pending.extend(t for t in self.steps[index].inputs.values() if t in self.producer)
        return frozenset(needed)


def step_model_names(proto: pb.ModelConfig) -> list[str]:
    """The models an ensemble config's steps name, in step order, without repeats."""
    names: list[str] = []
    for step in proto.ensemble_scheduling.step:
        if step.model_name and step.model_name not in names:
            names.append(step.model_name)
    return names


def find_ensemble_cycle(
    name: str, proto: pb.ModelConfig, read_config: Callable[[str], pb.ModelConfig | None]
) -> list[str] | None:
    """A chain of ensembles that leads from `name` back to itself, e.g. ["a", "b", "a"];
    None when there is none. `read_config` gives another model's config (None when it
    cannot be read: such a model cannot close a cycle here)."""
    configs: dict[str, pb.ModelConfig | None] = {name: proto}

    def config_of(model: str) -> pb.ModelConfig | None:
        if model not in configs:
            configs[model] = read_config(model)
        return configs[model]

    done: set[str] = set()
    path: list[str] = []

    def visit(model: str) -> list[str] | None:
        if model in path:
            return path[path.index(model) :] + [model]
        if model in done:
            return None
        config = config_of(model)
        if config is None or config.platform != "ensemble":
            done.add(model)
            return None
        path.append(model)
        for step_name in step_model_names(config):
            cycle = visit(step_name)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(model)
        return None

    return visit(name)


def describe_ensemble_cycle(name: str, cycle: list[str]) -> str:
    """The load error for ensemble `name` caught in `cycle` (`find_ensemble_cycle`)."""
    # Triton's words first (it names the first and last ensembles of the loop).
    return (
        f"ensemble '{name}': circular dependency between ensembles: {cycle[0]} -> ... -> {cycle[-2]} -> "
        f"{cycle[-1]} (its steps lead back to itself through ensembles: "
        + " -> ".join(cycle)
        + "; an ensemble cannot contain itself)"
    )


def load_order(names: list[str], read_config: Callable[[str], pb.ModelConfig | None]) -> list[list[str]]:
    """Waves of models to load one after another: first every model that is not an
    ensemble, then ensembles whose steps are all in earlier waves. Ensembles caught in a
    cycle come last (their load fails with the cycle named)."""
    configs = {n: read_config(n) for n in names}
    ensembles = {n for n, c in configs.items() if c is not None and c.platform == "ensemble"}
    waves = [[n for n in names if n not in ensembles]]
    placed: set[str] = set(waves[0])
    remaining = [n for n in names if n in ensembles]
    while remaining:
        ready = [
            n
            for n in remaining
            if all(s in placed or s not in ensembles for s in step_model_names(configs[n]))  # type: ignore[arg-type]
        ]
        if not ready:
            waves.append(remaining)
            break
        waves.append(ready)
        placed.update(ready)
        remaining = [n for n in remaining if n not in placed]
    return [wave for wave in waves if wave]


# -- validation --------------------------------------------------------------------------


@dataclass(slots=True)
class _TensorEnd:
    """Where a tensor is produced or read, with the type and shape declared there."""

    where: str  # e.g. "step 0 (model 'a') output 'OUTPUT0'" or "ensemble input 'IN'"
    data_type: int
    dims: tuple[int, ...]
    batching: bool
    model: str  # the step's model, or the ensemble for its own inputs and outputs

    @property
    def full_dims(self) -> tuple[int, ...]:
        return ((-1,) if self.batching else ()) + self.dims


def _fault(ensemble: str, where: str, message: str, code: ErrorCode = ErrorCode.INVALID_ARG) -> NaiadError:
    return NaiadError(code, f"ensemble '{ensemble}'{', ' + where if where else ''}: {message}")


def _dims_agree(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _type_name(data_type: int) -> str:
    return pb.DataType.Name(data_type)


def _shape(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def validate_ensemble(config: ModelConfig, lookup: StepConfigLookup) -> EnsemblePlan:
    """Check the ensemble against its step models' configs; raise NaiadError naming the
    fault, or return the plan."""
    name = config.name
    proto = config.proto
    scheduling = proto.ensemble_scheduling
    if not scheduling.step:
        raise _fault(name, "", "ensemble_scheduling has no step; an ensemble needs at least one")
    ensemble_batching = proto.max_batch_size > 0

    steps: list[EnsembleStep] = []
    step_configs: list[ModelConfig] = []
    for index, step in enumerate(scheduling.step):
        label = f"step {index}" + (f" (model '{step.model_name}')" if step.model_name else "")
        if not step.model_name:
            raise _fault(name, label, "model_name is empty")
        if step.model_version < -1:
            raise _fault(
                name, label, f"model_version must be -1 (latest) or a version number, got {step.model_version}"
            )
        try:
            step_config = lookup(step.model_name, step.model_version)
        except NaiadError as exc:
            # Triton's words first, then why.
            if step.model_version > 0:
                triton = (
                    f"ensemble '{name}' depends on '{step.model_name}' whose required version "
                    f"{step.model_version} is not loaded"
                )
            else:
                triton = f"ensemble {name} contains models that are not available or ambiguous: {step.model_name}"
            raise _fault(name, label, f"{triton} ({exc.message})", exc.code) from None
        if step_config.max_batch_size > 0 and step_config.max_batch_size < proto.max_batch_size:
            raise _fault(
                name,
                label,
                f"ensemble {name} allows maximum batch size {proto.max_batch_size}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {step_config.max_batch_size} "
                "(lower the ensemble's max_batch_size)",
            )
        _check_step_maps(name, label, step, step_config)
        # Protobuf maps have no order; sort so messages and runs are reproducible.
        inputs = dict(sorted(step.input_map.items()))
        outputs = dict(sorted(step.output_map.items()))
        steps.append(
            EnsembleStep(
                index=index,
                model_name=step.model_name,
                model_version=step.model_version,
                inputs=inputs,
                outputs=outputs,
                decoupled=step_config.decoupled,
                batching=step_config.max_batch_size > 0,
                input_dims={spec.name: spec.dims for spec in step_config.inputs},
            )
        )
        step_configs.append(step_config)

    # Producers: ensemble inputs and step outputs; a tensor has exactly one.
    produced: dict[str, _TensorEnd] = {}
    producer: dict[str, int] = {}
    ensemble_inputs = [i.name for i in proto.input]
    for item in proto.input:
        dims = tuple(item.reshape.shape) if item.HasField("reshape") else tuple(item.dims)
        produced[item.name] = _TensorEnd(f"ensemble input '{item.name}'", item.data_type, dims, ensemble_batching, name)
    for step, step_config in zip(steps, step_configs):
        for output_name, tensor in step.outputs.items():
            spec = _output_proto(step_config, output_name)
            where = f"{step.label} output '{output_name}'"
            if tensor in produced:
                raise _fault(
                    name,
                    f"{step.label}, tensor '{tensor}'",
                    f"{where} writes ensemble tensor '{tensor}', which {produced[tensor].where} already provides; "
                    "every ensemble tensor must have exactly one producer",
                )
            produced[tensor] = _TensorEnd(where, spec.data_type, tuple(spec.dims), step.batching, step.model_name)
            producer[tensor] = step.index

    consumers: dict[str, list[int]] = {}
    for step in steps:
        for input_name, tensor in step.inputs.items():
            if tensor not in produced:
                raise _fault(
                    name,
                    f"{step.label}, tensor '{tensor}'",
                    f"input '{input_name}' reads ensemble tensor '{tensor}', which is neither an ensemble input "
                    "nor mapped from any step's output",
                )
            consumers.setdefault(tensor, []).append(step.index)

    _check_cycles(name, steps, producer)

    # Type and shape agreement on every edge.
    for step, step_config in zip(steps, step_configs):
        for input_name, tensor in step.inputs.items():
            spec = _input_proto(step_config, input_name)
            reader = _TensorEnd(
                f"{step.label} input '{input_name}'", spec.data_type, tuple(spec.dims), step.batching, step.model_name
            )
            _check_agree(name, f"{step.label}, tensor '{tensor}'", tensor, produced[tensor], reader)
    ensemble_outputs = [o.name for o in proto.output]
    for item in proto.output:
        if item.name not in produced or item.name in ensemble_inputs:
            if item.name in ensemble_inputs:
                raise _fault(name, f"output '{item.name}'", "an ensemble output cannot also be an ensemble input")
            raise _fault(
                name,
                f"output '{item.name}'",
                "the ensemble output is not produced by any step (map a step output to it in output_map)",
            )
        dims = tuple(item.reshape.shape) if item.HasField("reshape") else tuple(item.dims)
        reader = _TensorEnd(f"ensemble output '{item.name}'", item.data_type, dims, ensemble_batching, name)
        step_label = steps[producer[item.name]].label
        _check_agree(name, f"{step_label}, tensor '{item.name}'", item.name, produced[item.name], reader)

    for tensor in ensemble_inputs:
        if tensor not in consumers:
            raise _fault(name, f"input '{tensor}'", "the ensemble input is not read by any step")
    for step in steps:
        for output_name, tensor in step.outputs.items():
            if tensor not in consumers and tensor not in ensemble_outputs:
                raise _fault(
                    name,
                    f"{step.label}, tensor '{tensor}'",
                    f"output '{output_name}' is mapped to ensemble tensor '{tensor}', which no step reads and "
                    "which is not an ensemble output; remove it from output_map",
                )

    output_labels = {
        tensor: labels
        for step, step_config in zip(steps, step_configs)
        for output_name, tensor in step.outputs.items()
        if tensor in ensemble_outputs and (labels := step_config.output_by_name[output_name].labels)
    }
    steps, lineage_of, output_lineage = _assign_lineages(name, steps, ensemble_inputs, ensemble_outputs, producer)
    return EnsemblePlan(
        name=name,
        steps=tuple(steps),
        inputs=tuple(ensemble_inputs),
        outputs=tuple(ensemble_outputs),
        producer=producer,
        consumers={t: tuple(v) for t, v in consumers.items()},
        output_lineage=output_lineage,
        decoupled=any(step.decoupled for step in steps),
        max_inflight_requests=scheduling.max_inflight_requests,
        lineage_of=lineage_of,
        output_labels=output_labels,
    )


def _input_proto(config: ModelConfig, name: str) -> pb.ModelInput:
    return next(i for i in config.proto.input if i.name == name)


def _output_proto(config: ModelConfig, name: str) -> pb.ModelOutput:
    return next(o for o in config.proto.output if o.name == name)


def _check_step_maps(ensemble: str, label: str, step: pb.ModelEnsembling.Step, config: ModelConfig) -> None:
    model = step.model_name
    input_names = [spec.name for spec in config.inputs]
    output_names = [spec.name for spec in config.outputs]
    for input_name, tensor in sorted(step.input_map.items()):
        if input_name not in input_names:
            raise _fault(
                ensemble,
                f"{label}, tensor '{tensor}'",
                f"in ensemble {ensemble}, ensemble tensor {tensor} is mapping to non-existing input {input_name} "
                f"in model {model} (its inputs: {', '.join(input_names) or 'none'})",
            )
    for spec in config.inputs:
        if spec.name not in step.input_map and not spec.optional:
            raise _fault(
                ensemble,
                label,
                f"in ensemble {ensemble}, input {spec.name} in model {model} is not mapped to any ensemble tensors "
                "(add it to input_map)",
            )
    targets: dict[str, str] = {}
    for output_name, tensor in sorted(step.output_map.items()):
        if output_name not in output_names:
            raise _fault(
                ensemble,
                f"{label}, tensor '{tensor}'",
                f"in ensemble {ensemble}, ensemble tensor {tensor} is mapped from non-existing output "
                f"{output_name} in model {model} (its outputs: {', '.join(output_names) or 'none'})",
            )
        if tensor in targets:
            raise _fault(
                ensemble,
                f"{label}, tensor '{tensor}'",
                f"outputs '{targets[tensor]}' and '{output_name}' of model '{model}' are both mapped to ensemble "
                f"tensor '{tensor}'",
            )
        targets[tensor] = output_name


def _check_cycles(ensemble: str, steps: list[EnsembleStep], producer: dict[str, int]) -> None:
    """Depth-first search from each step to the steps that produce its inputs."""
    finished: set[int] = set()
    path: list[int] = []  # each entry reads a tensor the next one produces

    def visit(index: int) -> None:
        path.append(index)
        for tensor in steps[index].inputs.values():
            upstream = producer.get(tensor)
            if upstream is None or upstream in finished:
                continue
            if upstream in path:
                # Data flows from the end of the path back towards its start.
                loop = [upstream] + list(reversed(path[path.index(upstream) + 1 :])) + [upstream]
                chain = " -> ".join(steps[i].label for i in loop)
                raise _fault(
                    ensemble,
                    f"{steps[index].label}, tensor '{tensor}'",
                    f"the steps form a cycle: {chain}",
                )
            visit(upstream)
        path.pop()
        finished.add(index)

    for step in steps:
        if step.index not in finished:
            visit(step.index)


def _check_agree(ensemble: str, where: str, tensor: str, source: _TensorEnd, reader: _TensorEnd) -> None:
    if source.data_type != reader.data_type:
        raise _fault(
            ensemble,
            where,
            f"in ensemble {ensemble}, ensemble tensor {tensor}: inconsistent data type: "
            f"{_type_name(source.data_type)} is inferred from model {source.model} while "
            f"{_type_name(reader.data_type)} is inferred from model {reader.model} ({source.where} and "
            f"{reader.where})",
        )
    if not _dims_agree(source.dims, reader.dims) and not _dims_agree(source.full_dims, reader.full_dims):
        raise _fault(
            ensemble,
            where,
            f"in ensemble {ensemble}, ensemble tensor {tensor}: inconsistent shape: {_shape(source.full_dims)} "
            f"is inferred from model {source.model} while {_shape(reader.full_dims)} is inferred from model "
            f"{reader.model} ({source.where} and {reader.where})",
        )


def _assign_lineages(
    ensemble: str,
    steps: list[EnsembleStep],
    ensemble_inputs: list[str],
    ensemble_outputs: list[str],
    producer: dict[str, int],
) -> tuple[list[EnsembleStep], dict[str, int], int]:
    """Give every tensor the decoupled step it descends from (0: none) and refuse steps
    and outputs that would mix two such lineages."""
    lineage_of: dict[str, int] = {t: 0 for t in ensemble_inputs}
    assigned: dict[int, EnsembleStep] = {}

    def step_lineage(index: int) -> int:
        if index in assigned:
            return assigned[index].lineage
        step = steps[index]
        seen: dict[int, str] = {}
        for tensor in step.inputs.values():
            lineage = tensor_lineage(tensor)
            seen.setdefault(lineage, tensor)
        if len(seen) > 1:
            described = ", ".join(f"'{t}' ({_lineage_name(steps, lin)})" for lin, t in sorted(seen.items()))
            raise _fault(
                ensemble,
                step.label,
                f"in ensemble {ensemble}, step of model '{step.model_name}' receives inputs originated from "
                f"different decoupled models ({described}: their responses cannot be paired)",
            )
        lineage = next(iter(seen), 0)
        assigned[index] = _with_lineage(step, lineage)
        return lineage

    def tensor_lineage(tensor: str) -> int:
        if tensor not in lineage_of:
            index = producer[tensor]
            step_lineage(index)
            lineage_of[tensor] = assigned[index].output_lineage
        return lineage_of[tensor]

    for step in steps:
        step_lineage(step.index)
    output_lineages: dict[int, str] = {}
    for tensor in ensemble_outputs:
        output_lineages.setdefault(tensor_lineage(tensor), tensor)
    if len(output_lineages) > 1:
        described = ", ".join(f"'{t}' ({_lineage_name(steps, lin)})" for lin, t in sorted(output_lineages.items()))
        raise _fault(
            ensemble,
            "",
            # Triton's words: it sees the ensemble's outputs as a step of the ensemble's own.
            f"in ensemble {ensemble}, step of model '{ensemble}' receives inputs originated from different "
            f"decoupled models (the ensemble outputs {described}: one response could not carry them together)",
        )
    for step in steps:
        for tensor in step.outputs.values():
            tensor_lineage(tensor)
    return [assigned[s.index] for s in steps], lineage_of, next(iter(output_lineages), 0)


def _lineage_name(steps: list[EnsembleStep], lineage: int) -> str:
    return "the ensemble request" if lineage == 0 else f"decoupled {steps[lineage - 1].label}"


def _with_lineage(step: EnsembleStep, lineage: int) -> EnsembleStep:
    return EnsembleStep(
        index=step.index,
        model_name=step.model_name,
        model_version=step.model_version,
        inputs=step.inputs,
        outputs=step.outputs,
        decoupled=step.decoupled,
        batching=step.batching,
        input_dims=step.input_dims,
        lineage=lineage,
    )
