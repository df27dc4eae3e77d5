"""`check_repositories`: every model of one or more model repositories checked as a load
would check it, without serving (no ports, no model instances), every problem a finding.

Models are checked in the order a server loads them (`load_order`): ensembles after the
models their steps name, so each step's completed config is at hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf.descriptor import Descriptor

from ..config.ensemble_validation import load_order
from ..config.written_fields import fields_written_in_text
from ..errors import NaiadError
from ..models.backend_registry import BackendRegistry
from ..models.config_completion import Written
from ..protos import model_config_pb2 as pb
from ..repository.local import ModelSource, Repository, find_models
from ..repository.remote import open_repository
from .checked_model import CheckedModel
from .config_checks import (
    check_backend_named,
    check_config_alone,
    check_devices,
    check_unacted_fields,
    parse_config,
)
from .config_source import ConfigSource
from .ensemble_checks import check_ensemble_cycle, check_ensemble_steps
from .finding import Finding
from .layout_checks import check_misplaced_model_file, check_version_directories, check_versions
from .model_file_checks import check_model_files

# The generated module's descriptor, typed as the pure-Python one (the stubs offer either).
_DESCRIPTOR: Descriptor = pb.ModelConfig.DESCRIPTOR  # type: ignore[assignment]

__all__ = ["CheckReport", "check_repositories"]


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The findings, repository problems first, then model by model in name order;
    `models`: how many models were checked."""

    findings: list[Finding]
    models: int

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)


def check_repositories(
    locations: list[str],
    config_name: str = "",
    backends: BackendRegistry | None = None,
    auto_complete: bool = True,
) -> CheckReport:
    """Check every model of the repositories at `locations` (local directories or object
    store URLs, as `--model-repository` takes them); `config_name` as tritonserver's
    --model-config-name; `auto_complete` False as --disable-auto-complete-config. `backends`
    defaults to the installed backend packages."""
    findings: list[Finding] = []
    repositories: list[Repository] = []
    # Each repository's directory (a remote one's local mirror), to the location as given.
    shown: dict[Path, str] = {}
    for location in locations:
        if (Path(location) / "config.pbtxt").is_file():
            # A model's own directory: read as a repository, its version directories would
            # be taken for models, each failing in its own confusing way.
            parent = Path(location).resolve().parent
            message = f"{location} is a model directory (it holds config.pbtxt), not a model repository"
            findings.append(Finding("error", "", location, "", None, None, message, f"name its parent: {parent}"))
            continue
        try:
            repository = open_repository(location)  # a remote one is mirrored here
            shown.update({source.repository: location for source in repository.list_models().values()})
            repositories.append(repository)
        except NaiadError as exc:
            findings.append(Finding("error", "", location, "", None, None, exc.message, "name a model repository"))
    try:
        sources, duplicates = find_models(repositories)
    except NaiadError as exc:
        findings.append(Finding("error", "", ", ".join(locations), "", None, None, exc.message, "name a directory"))
        return CheckReport(findings, 0)
    for name, why in sorted(duplicates.items()):
        findings.append(
            Finding("error", name, ", ".join(locations), "", None, None, why, "keep the model in one repository")
        )
    models = {name: _checked(source, shown, config_name) for name, source in sources.items()}
    registry = backends or BackendRegistry()
    try:
        _check_all(models, registry, auto_complete)
    finally:
        if backends is None:
            registry.finalize()
    for name in sorted(models):
        findings.extend(models[name].findings)
    return CheckReport(findings, len(models) + len(duplicates))


def _checked(source: ModelSource, shown: dict[Path, str], config_name: str) -> CheckedModel:
    location = shown.get(source.repository, str(source.repository))
    return CheckedModel(source, location, ConfigSource.read(source, config_name))


def _check_all(models: dict[str, CheckedModel], backends: BackendRegistry, auto_complete: bool) -> None:
    parsed = {name: _check_config(model, auto_complete) for name, model in models.items()}
    for wave in load_order(sorted(models), parsed.get):
        for name in wave:
            model, proto = models[name], parsed[name]
            if proto is None or model.failed:
                continue
            if proto.platform == "ensemble":
                if check_ensemble_cycle(model, proto, parsed.get):
                    check_ensemble_steps(model, proto, models)
            else:
                text = model.config.text or ""
                written = Written(fields_written_in_text(text, _DESCRIPTOR), "config.pbtxt")
                check_model_files(model, proto, backends, written, auto_complete)


def _check_config(model: CheckedModel, auto_complete: bool) -> pb.ModelConfig | None:
    """The checks of config.pbtxt and the model's directory; the parsed config (backend
    resolved) when a load would go on to the model files."""
    check_version_directories(model)
    proto = parse_config(model, auto_complete)
    if proto is None:
        return None
    # As a load: with auto-complete, inputs and outputs wait for the backend.
    check_config_alone(model, proto, with_io=not auto_complete)
    check_misplaced_model_file(model, proto)
    if not check_backend_named(model, proto):
        return proto
    check_unacted_fields(model, proto)
    check_devices(model, proto)
    check_versions(model, proto)
    model.proto = proto
    return proto
