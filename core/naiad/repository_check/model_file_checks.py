"""The checks of a config against its model files, as a load makes them but without
serving: the backend is found and created as a load creates it, auto-complete fills the
config in, Triton's defaults follow, the completed config is validated, and the backend's
`Model.initialize` reads the model file and compares it with the config. No instance is
created and nothing runs; each model is finalized at once.

A framework is imported only when a model of its backend is present: the backends import
theirs when a model is created, never when they are discovered.
"""

from __future__ import annotations

from ..backend.abi import Backend, Model, ModelContext
from ..config.model_config import ConfigError, ModelConfig, validate_config, validation_checks
from ..config.unknown_fields import nearest_name
from ..errors import ErrorCode, NaiadError
from ..models.backend_registry import BACKEND_PACKAGES, BackendRegistry
from ..models.config_completion import Written, auto_gpus, complete_config
from ..protos import model_config_pb2 as pb
from .checked_model import CheckedModel
from .config_checks import fix_for

__all__ = ["check_model_files"]

_CHANGED_FIX = "write the value the model runs with (or leave the field out for auto-complete to choose it)"
_UNREADABLE_FIX = "replace the model file with one its backend can load (or name the right backend)"
_MODEL_FIX = (
    "make the config agree with the model file (or leave its inputs and outputs out, and auto-complete fills them "
    "in from the model)"
)


def check_model_files(
    model: CheckedModel, proto: pb.ModelConfig, backends: BackendRegistry, written: Written, auto_complete: bool
) -> None:
    """Every version a load builds, with the backend's auto-complete when `auto_complete`;
    `model.completed` is the config of the latest one that passed."""
    backend = _backend(model, proto, backends)
    if backend is None:
        return
    for version in model.versions:
        _check_version(model, proto, backend, version, written, auto_complete)


def _backend(model: CheckedModel, proto: pb.ModelConfig, backends: BackendRegistry) -> Backend | None:
    try:
        return backends.get(proto.backend)
    except NaiadError as exc:
        if exc.code == ErrorCode.UNAVAILABLE and proto.backend in BACKEND_PACKAGES:
            # The config may be right: the machine that serves it may have the backend.
            model.report(
                "warning",
                exc.message + "; its model files were not checked",
                f"pip install {BACKEND_PACKAGES[proto.backend]} where naiad check runs",
                field="backend" if "backend" in model.config.positions else "platform",
            )
            return None
        nearest = nearest_name(proto.backend, [*backends.names, *BACKEND_PACKAGES])
        fix = f'did you mean backend: "{nearest}"?' if nearest else "name an installed backend"
        model.report("error", exc.message, fix, field="backend")
        return None


def _check_version(
    model: CheckedModel, base: pb.ModelConfig, backend: Backend, version: int, written: Written, auto_complete: bool
) -> None:
    proto = pb.ModelConfig()
    proto.CopyFrom(base)
    filename = proto.default_model_filename or backend.default_model_filename
    version_path = model.source.version_path(version)
    shown = f"{model.name}/{version}/{filename}"
    if filename and not (version_path / filename).exists():
        model.report(
            "error",
            f"version {version} has no model file '{filename}'",
            f"put the model file at {shown}, or set default_model_filename to the name it has",
            file=shown,
        )
        return
    untouched = pb.ModelConfig()
    untouched.CopyFrom(proto)
    provisional = ModelConfig(proto, written=written.fields)
    context = ModelContext(model.name, version, model.source.path, version_path, provisional, filename)
    instance = backend.create_model(context)
    try:
        for field, change in complete_config(
            instance, provisional, filename, written, auto_complete, auto_gpus(backend)
        ):
            # A value the config leaves out is auto-complete's to choose; one it writes is not.
            if field in written.fields:
                model.report("warning", change, _CHANGED_FIX, field=field)
        if auto_complete:
            _explicit_zero_batch_size(model, instance, untouched, proto, written)
        if not _validate(model, proto):
            return
        config = validate_config(proto, model.name, model.source.path, written.fields)
        context.config = config
        instance.initialize()
        model.completed = config
    except NaiadError as exc:
        _report_model_fault(model, exc.message, shown)
    except Exception as exc:  # noqa: BLE001 - a backend's own failure fails the load too
        _report_model_fault(model, f"the {backend.name} backend failed: {type(exc).__name__}: {exc}", shown)
    finally:
        instance.finalize()


def _report_model_fault(model: CheckedModel, message: str, model_file: str) -> None:
    """A fault found with the model file at hand: at the config line it names; in the
    config when it speaks of the configuration; else at the model file (one that does not
    load names no line of the config)."""
    # A plain word is no evidence here: a backend's message about its file says "platform".
    at = model.config.locate(message, "input", words=False)
    if at != (None, None) or "config" in message:
        model.report("error", message, _MODEL_FIX, at=at)
    else:
        model.report("error", message, _UNREADABLE_FIX, file=model_file)


def _validate(model: CheckedModel, proto: pb.ModelConfig) -> bool:
    """Each check of the completed config; whether all passed."""
    passed = True
    for field, check in validation_checks():
        try:
            check(proto, model.name)
        except ConfigError as exc:
            model.report("error", exc.message, fix_for(field, exc.message, model.name), field=field)
            passed = False
    return passed


def _explicit_zero_batch_size(
    model: CheckedModel, instance: Model, untouched: pb.ModelConfig, completed: pb.ModelConfig, written: Written
) -> None:
    """A written `max_batch_size: 0` keeps auto-complete from choosing a batch size, which
    is right when meant; say what it would have chosen, in case it was not."""
    if "max_batch_size" not in written.fields or untouched.max_batch_size != 0 or completed.max_batch_size != 0:
        return
    unwritten = pb.ModelConfig()
    unwritten.CopyFrom(untouched)
    config = ModelConfig(unwritten, written=written.fields - {"max_batch_size"})
    try:
        instance.auto_complete_config(config)
    except NaiadError:
        return
    if unwritten.max_batch_size == 0:
        return
    model.report(
        "warning",
        f"max_batch_size is written as 0, so auto-complete keeps it and the model serves without batching; "
        f"without that line auto-complete would set max_batch_size to {unwritten.max_batch_size}, since the model "
        "supports batching",
        f"remove `max_batch_size: 0` to batch up to {unwritten.max_batch_size}, or keep it to serve without batching",
        field="max_batch_size",
    )
