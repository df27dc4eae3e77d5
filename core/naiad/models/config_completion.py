"""What a load does to a config between reading it and serving it: the backend's
auto-complete (when on), then Triton's defaults, and every value either of them changed
that the user wrote (`complete_config`); for an ensemble, Triton's defaults, then its checks
and its wiring against its steps' configs (`complete_ensemble`).

A load logs the changes as warnings and goes on; `naiad check` reports them as findings
without serving. Both go through these functions, so they see the same config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..backend.abi import Backend, Model
from ..config.defaults import fill_config_defaults
from ..config.ensemble_validation import EnsemblePlan, StepConfigLookup, validate_ensemble
from ..config.model_config import ModelConfig, validate_config
from ..devices import gpu_ids
from ..protos import model_config_pb2 as pb
from .config_changes import describe_changes

__all__ = ["Written", "auto_gpus", "complete_config", "complete_ensemble"]


@dataclass(frozen=True, slots=True)
class Written:
    """The fields the user's config gives a value, and the file (or override) that gives them."""

    fields: frozenset[str]
    source: str


def auto_gpus(backend: Backend) -> list[int]:
    """The GPUs a KIND_AUTO group of `backend`'s models goes on: none when the backend cannot
    run on a GPU here (Backend.runs_on_gpus). The backend is asked only on a machine with
    GPUs: its answer may cost a framework's device probe."""
    gpus = gpu_ids()
    return gpus if gpus and backend.runs_on_gpus() else []


def complete_config(
    model: Model, config: ModelConfig, filename: str, written: Written, auto_complete: bool, gpus: list[int]
) -> list[tuple[str, str]]:
    """Fill `config.proto` in place, as a load does; returns (field path, message) for
    each change to what the user wrote (`config_changes.describe_changes`). `gpus` are the
    ones a KIND_AUTO group may go on (`auto_gpus`)."""
    proto = config.proto
    name = proto.name
    changes = []
    as_written = pb.ModelConfig()
    as_written.CopyFrom(proto)
    if auto_complete:
        model.auto_complete_config(config)
        changes += describe_changes(as_written, proto, written.fields, "auto-complete", written.source)
        as_written.CopyFrom(proto)
    fill_config_defaults(proto, name, filename, gpus)
    changes += describe_changes(as_written, proto, written.fields, "Triton's defaults", written.source)
    return changes


def complete_ensemble(
    proto: pb.ModelConfig, name: str, model_dir: Path, step_config: StepConfigLookup
) -> tuple[ModelConfig, EnsemblePlan]:
    """Fill and validate an ensemble's config in place, and check its wiring against its
    steps' configs (`step_config`); raises NaiadError naming the fault."""
    fill_config_defaults(proto, name, "", [])
    config = validate_config(proto, name, model_dir)
    plan = validate_ensemble(config, step_config)
    config.inherit_labels(plan.output_labels)
    # As in Triton, an ensemble with a decoupled step streams: it is decoupled itself.
    proto.model_transaction_policy.decoupled = plan.decoupled
    return config, plan
