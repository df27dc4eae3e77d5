"""The checks of config.pbtxt on its own, through the server's own functions: the parse
(syntax, unknown fields, enum values), each of the checks a load runs before it looks at
any file, the backend the config names, the instance groups' devices, and the fields
naiad reads without acting on.

A load stops at the first fault; here each independent check reports its own, so one run
shows everything wrong with a config.
"""

from __future__ import annotations

import re

from ..config.instance_group_checks import check_instance_groups
from ..config.model_config import (
    PLATFORM_TO_BACKEND,
    ConfigError,
    config_alone_checks,
    parse_config_text,
    resolve_backend,
)
from ..config.unacted import unacted_fields
from ..config.unknown_fields import nearest_name
from ..devices import gpu_ids
from ..models.building import MISSING_CONFIG
from ..protos import model_config_pb2 as pb
from .checked_model import CheckedModel

__all__ = [
    "parse_config",
    "check_config_alone",
    "check_backend_named",
    "check_devices",
    "check_unacted_fields",
    "fix_for",
]

# `UnknownField.describe`'s words, as parse_config_text puts them in its error.
_UNKNOWN_FIELD = re.compile(r"unknown field (?P<field>[^\s;]+)[^;]*(?:; did you mean (?P<nearest>\w+)\?)?")
_NO_ENUM_VALUE = re.compile(r'Enum type "(?P<type>[\w.]+)" has no value named (?P<value>\w+)')

# What to do about a fault each config-alone check finds, by the field it is about.
_FIXES: dict[str, str] = {
    "max_batch_size": "set max_batch_size to 0 (no batching) or to the largest batch the model takes",
    "dynamic_batching": (
        "keep preferred_batch_size within 1..max_batch_size and priority levels within 1..priority_levels"
    ),
    "sequence_batching": "give each sequence control one tensor and one pair of false/true values of one kind",
    "ensemble_scheduling": 'set platform: "ensemble" with ensemble_scheduling steps that each name a model, '
    "an input_map and an output_map, and wire every ensemble input and output to a step",
    "response_cache": "disable response_cache for a decoupled model",
    "model_metrics": "give each metric_control a metric_identifier family and histogram_options buckets",
    "version_policy": "list positive version numbers (or use latest { num_versions: N } with N >= 1)",
    "sequence_batching.state": "give each state an input_name, an output_name and a data_type",
    "input": "give each input and output a unique name, a data_type and dims (integers >= 1, or -1 for a "
    "variable size)",
    "default_model_filename": "name a file inside the version directory (no '/' or '..')",
    "instance_group": "give each instance group a count >= 0, a name of its own and GPU ids >= 0",
}


def parse_config(model: CheckedModel, auto_complete: bool) -> pb.ModelConfig | None:
    """The config parsed as a load parses it, else None with the parse error reported
    (a model without config.pbtxt has an empty one, unless auto-complete is off)."""
    text = model.config.text
    if text is None and not auto_complete:
        model.report(
            "error",
            MISSING_CONFIG,
            f"write {model.name}/config.pbtxt, or let auto-complete fill it in (no --disable-auto-complete-config)",
            file=model.config.file,
        )
        return None
    try:
        proto = parse_config_text(text or "", model.name)
    except ConfigError as exc:
        at = (exc.line, exc.column) if exc.line is not None else None
        model.report("error", exc.message, _parse_fix(exc.message), at=at)
        return None
    model.config.proto = proto
    return proto


def _parse_fix(message: str) -> str:
    unknown = _UNKNOWN_FIELD.search(message)
    if unknown is not None:
        if unknown["nearest"]:
            return f"rename {unknown['field']} to {unknown['nearest']}"
        return f"remove {unknown['field']}, or rename it to one of the known fields listed"
    enum = _NO_ENUM_VALUE.search(message)
    if enum is not None:
        values = _enum_values(enum["type"])
        nearest_value = nearest_name(enum["value"], values)
        if nearest_value is not None:
            return f"did you mean {nearest_value}? (values: {', '.join(values)})"
        return f"use one of: {', '.join(values)}"
    if " is not a value of " in message:
        return "use one of the values listed, by name"
    return "correct the protobuf text at this line and column (fields are `name: value` or `name { ... }`)"


def _enum_values(full_name: str) -> list[str]:
    try:
        enum = pb.DESCRIPTOR.pool.FindEnumTypeByName(full_name)
    except KeyError:
        return []
    return [value.name for value in enum.values]


def check_config_alone(model: CheckedModel, proto: pb.ModelConfig, with_io: bool) -> None:
    """Each check a load runs on the config before it looks at any file."""
    for field, check in config_alone_checks(with_io):
        try:
            check(proto, model.name)
        except ConfigError as exc:
            model.report("error", exc.message, fix_for(field, exc.message, model.name), field=field)


def fix_for(field: str, message: str, model: str) -> str:
    """What to do about `message`, found by the check about `field`."""
    if field == "name":
        return f'set name: "{model}" (the directory\'s name), or leave name out'
    if field == "input" and "duplicate" in message:
        return "give each input, and each output, a name of its own"
    return _FIXES.get(field, f"correct {field}")


def check_backend_named(model: CheckedModel, proto: pb.ModelConfig) -> bool:
    """The backend the config names, or that its model file or name implies (filled into
    `proto` as a load fills it); False, reported, when there is none."""
    try:
        resolve_backend(proto, model.name, [model.source.version_path(v) for v in reversed(model.source.versions())])
    except ConfigError as exc:
        if proto.platform:
            nearest = nearest_name(proto.platform, sorted(PLATFORM_TO_BACKEND))
            fix = f'did you mean platform: "{nearest}"?' if nearest else "name a known platform, or a backend instead"
            model.report("error", exc.message, fix, field="platform")
        else:
            fix = (
                'name the backend in config.pbtxt (backend: "onnxruntime", "python", ...), or put a model file '
                f"with its default name (model.onnx, model.py, ...) in {model.name}/1/"
            )
            model.report("error", exc.message, fix, field="backend")
        return False
    return True


def check_devices(model: CheckedModel, proto: pb.ModelConfig) -> None:
    """The instance groups' devices against this machine's GPUs. A group that asks for
    GPUs this machine lacks is a warning when the config is otherwise sound: the machine
    that serves it may have them."""
    here = gpu_ids()
    try:
        check_instance_groups(proto, model.name, here)
    except ConfigError as exc:
        wanted = sorted({gpu for group in proto.instance_group for gpu in group.gpus} | {0})
        try:
            check_instance_groups(proto, model.name, sorted(set(here) | set(range(max(wanted) + 1))))
        except ConfigError:
            model.report("error", exc.message, "correct the instance_group's kind or gpus", field="instance_group")
            return
        model.report(
            "warning",
            exc.message + " (on this machine)",
            "serve it where those GPUs are, or use kind: KIND_CPU here",
            field="instance_group",
        )


def check_unacted_fields(model: CheckedModel, proto: pb.ModelConfig) -> None:
    """Fields naiad parses without acting on (a load logs the same)."""
    for field, why in unacted_fields(proto):
        model.report("warning", f"config field '{field}' has no effect in naiad: {why}", f"remove {field}", field=field)
