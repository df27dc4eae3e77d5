"""The checks of an ensemble, through the server's own: a cycle of ensembles, and the
wiring, data types and shapes of its steps against their models' completed configs (the
configs a load of each step would serve with)."""

from __future__ import annotations

from collections.abc import Callable

from ..config.ensemble_validation import describe_ensemble_cycle, find_ensemble_cycle, step_model_names
from ..config.model_config import ModelConfig
from ..errors import NaiadError
from ..models.config_completion import complete_ensemble
from ..protos import model_config_pb2 as pb
from .checked_model import CheckedModel
from .config_source import Position

__all__ = ["check_ensemble_cycle", "check_ensemble_steps"]


def check_ensemble_cycle(
    model: CheckedModel, proto: pb.ModelConfig, read_config: Callable[[str], pb.ModelConfig | None]
) -> bool:
    """An ensemble whose steps lead back to itself; False, reported, when there is one."""
    cycle = find_ensemble_cycle(model.name, proto, read_config)
    if cycle is None:
        return True
    following = cycle[1]
    model.report(
        "error",
        describe_ensemble_cycle(model.name, cycle),
        f"remove step {_step_index(proto, following)} (model '{following}') or make it name a model that does not "
        f"lead back to '{model.name}'",
        at=_step_position(model, proto, following),
    )
    return False


def check_ensemble_steps(model: CheckedModel, proto: pb.ModelConfig, steps: dict[str, CheckedModel]) -> None:
    """The ensemble's completed config and its wiring against each step's completed config.
    `steps`: every model of the repository checked so far, by name. A step model with
    errors of its own makes the ensemble fail too, as a load would; its faults are
    reported under it, not again here."""
    unchecked = [name for name in step_model_names(proto) if name in steps and steps[name].completed is None]
    failing = [name for name in unchecked if steps[name].failed]
    if failing:
        # As a load of the ensemble fails with its step's; the step's findings say why.
        model.report(
            "error",
            f"step model '{failing[0]}' would fail to load, and the ensemble with it",
            f"correct '{failing[0]}' (its findings are listed under it)",
            at=_step_position(model, proto, failing[0]),
        )
        return
    if unchecked:
        # Its backend is missing here: the step's own warning says so, this one what it costs.
        model.report(
            "warning",
            f"the wiring of the ensemble was not checked: step model '{unchecked[0]}' could not be checked here",
            f"install the backend of '{unchecked[0]}' where naiad check runs",
            at=_step_position(model, proto, unchecked[0]),
        )
        return
    completed = pb.ModelConfig()
    completed.CopyFrom(proto)

    def lookup(name: str, version: int) -> ModelConfig:
        step = steps.get(name)
        if step is None or step.completed is None:
            raise NaiadError.not_found(f"unknown model '{name}': no such model in the model repository")
        return step.completed

    try:
        config, _ = complete_ensemble(completed, model.name, model.source.path, lookup)
    except NaiadError as exc:
        model.report("error", exc.message, _wiring_fix(exc.message), field="ensemble_scheduling")
        return
    model.completed = config


def _wiring_fix(message: str) -> str:
    if "not available" in message or "is not loaded" in message:
        return "add the step's model to the repository, or correct the step's model_name"
    if "inconsistent shape" in message:
        return "make the dims of the tensor agree where it is written and where it is read (or reshape one end)"
    if "inconsistent data type" in message:
        return "make the data_type of the tensor agree where it is written and where it is read"
    return "map every step input and output (input_map, output_map) to an ensemble tensor, each written once"


def _step_index(proto: pb.ModelConfig, step_model: str) -> int:
    return next(i for i, step in enumerate(proto.ensemble_scheduling.step) if step.model_name == step_model)


def _step_position(model: CheckedModel, proto: pb.ModelConfig, step_model: str) -> Position:
    """Where the first step that names `step_model` names it."""
    return model.config.position(f"ensemble_scheduling.step[{_step_index(proto, step_model)}].model_name")
