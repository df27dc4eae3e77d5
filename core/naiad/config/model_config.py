"""Model configuration: `config.pbtxt` parsed into Triton's `ModelConfig` message, validated
once at load, and exposed through typed views so no raw dicts travel past this module.

Messages always name the model, the field and the fault, e.g.
``model 'resnet': input 'x' (input[0].dims): dims must not be empty``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import json_format, text_format
from google.protobuf.descriptor import FieldDescriptor

from ..datatypes import config_type_to_datatype
from ..flag_values import BOOLEAN_WORDS, bool_of
from ..protos import model_config_pb2 as pb
from ..safe_names import inside_directory
from .config_error import ConfigError
from .io_checks import check_io
from .model_wide_checks import MODEL_WIDE_CHECKS, ConfigCheck
from .unknown_fields import describe_unknown_field

__all__ = [
    "ConfigError",
    "ModelConfig",
    "TensorSpec",
    "PLATFORM_TO_BACKEND",
    "BACKEND_TO_PLATFORM",
    "FILENAME_TO_BACKEND",
    "parse_config_text",
    "config_from_dict",
    "int64_as_numbers",
    "validate_config",
    "check_config_alone",
    "config_alone_checks",
    "validation_checks",
    "resolve_backend",
]

# Triton platform names and the backend that serves each.
PLATFORM_TO_BACKEND: dict[str, str] = {
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorrt_plan": "tensorrt",
    "caffe2_netdef": "caffe2",
    "ensemble": "ensemble",
}

# The platform Triton reports for a model configured by backend name only.
BACKEND_TO_PLATFORM: dict[str, str] = {
    "onnxruntime": "onnxruntime_onnx",
    "pytorch": "pytorch_libtorch",
    "tensorrt": "tensorrt_plan",
}

# Triton's default model file names, used when a config names neither platform nor backend.
FILENAME_TO_BACKEND: dict[str, tuple[str, str]] = {
    "model.plan": ("tensorrt", "tensorrt_plan"),
    "model.onnx": ("onnxruntime", "onnxruntime_onnx"),
    "model.pt": ("pytorch", "pytorch_libtorch"),
    "model.pt2": ("pytorch", "pytorch_libtorch"),
    "model.graphdef": ("tensorflow", "tensorflow_graphdef"),
    "model.savedmodel": ("tensorflow", "tensorflow_savedmodel"),
    "model.netdef": ("caffe2", "caffe2_netdef"),
    "model.py": ("python", ""),
}


_Derived = TypeVar("_Derived")

# Counts that size what a load builds, one object each: instances, priority levels, sequence
# slots. Triton builds whatever a config asks for; past these bounds a typo (or a config
# override sent to the load API) would exhaust the server's memory before failing.
MAX_INSTANCES = 10_000
MAX_PRIORITY_LEVELS = 10_000
MAX_SEQUENCE_SLOTS = 1_000_000


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An input or output as the config declares it.

    `dims` excludes the batch dimension; `shape_with_batch` is what a request must carry
    for batching models (`-1` leading). `labels` holds an output's label file lines.
    """

    name: str
    datatype: str
    dims: tuple[int, ...]
    reshape: tuple[int, ...] | None = None
    optional: bool = False
    allow_ragged_batch: bool = False
    is_shape_tensor: bool = False
    labels: tuple[str, ...] | None = None


class ModelConfig:
    """A validated model configuration.

    `proto` is the full `inference.ModelConfig` message (every Triton field); the
    attributes are typed views of what the server itself acts on.
    """

    def __init__(
        self,
        proto: pb.ModelConfig,
        labels: dict[str, tuple[str, ...]] | None = None,
        written: frozenset[str] = frozenset(),
    ) -> None:
        self.proto = proto
        self._labels = labels or {}
        self._written = written
        self._refresh()

    def user_wrote(self, field: str) -> bool:
        """Whether the user's config (config.pbtxt or a load's JSON override) gives `field`
        (a path: `max_batch_size`, `instance_group[0].count`) a value, zero included.
        The parsed proto cannot tell: `max_batch_size: 0` and no max_batch_size read the same,
        yet auto-complete may fill only the second (Triton's model configuration docs)."""
        return field in self._written

    def _refresh(self) -> None:
        p = self.proto
        self._derived: dict[Callable[[ModelConfig], Any], Any] = {}
        self.inputs: list[TensorSpec] = [
            TensorSpec(
                name=i.name,
                datatype=config_type_to_datatype(pb.DataType.Name(i.data_type)),
                dims=tuple(i.dims),
                reshape=tuple(i.reshape.shape) if i.HasField("reshape") else None,
                optional=i.optional,
                allow_ragged_batch=i.allow_ragged_batch,
                is_shape_tensor=i.is_shape_tensor,
            )
            for i in p.input
        ]
        self.outputs: list[TensorSpec] = [
            TensorSpec(
                name=o.name,
                datatype=config_type_to_datatype(pb.DataType.Name(o.data_type)),
                dims=tuple(o.dims),
                reshape=tuple(o.reshape.shape) if o.HasField("reshape") else None,
                is_shape_tensor=o.is_shape_tensor,
                labels=self._labels.get(o.name),
            )
            for o in p.output
        ]
        self.input_by_name = {spec.name: spec for spec in self.inputs}
        self.output_by_name = {spec.name: spec for spec in self.outputs}

    @property
    def labels(self) -> dict[str, tuple[str, ...]]:
        """Each output's label file lines, by output name (outputs without labels left out)."""
        return dict(self._labels)

    def inherit_labels(self, labels: dict[str, tuple[str, ...]]) -> None:
        """Give the outputs that have no label file of their own the labels in `labels`
        (an ensemble's outputs take those of the step outputs that produce them)."""
        for name, lines in labels.items():
            self._labels.setdefault(name, lines)
        self._refresh()

    def refresh(self) -> None:
        """Recompute the typed views after a backend filled the proto in (auto-complete)."""
        self._refresh()

    def derived(self, build: Callable[[ModelConfig], _Derived]) -> _Derived:
        """`build(self)`, built on first use and kept until the next `refresh`: what the
        request path reads of the config, read once instead of per request (reading a
        protobuf field costs about a microsecond)."""
        try:
            return self._derived[build]  # type: ignore[no-any-return]
        except KeyError:
            value = self._derived[build] = build(self)
            return value

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def backend(self) -> str:
        return self.proto.backend

    @property
    def platform(self) -> str:
        return self.proto.platform

    @property
    def max_batch_size(self) -> int:
        return self.proto.max_batch_size

    @property
    def decoupled(self) -> bool:
        return self.proto.model_transaction_policy.decoupled

    @property
    def scheduling(self) -> str:
        """ "dynamic_batching", "sequence_batching", "ensemble_scheduling" or "" (direct)."""
        return self.proto.WhichOneof("scheduling_choice") or ""

    def parameter(self, key: str, default: str | None = None) -> str | None:
        """A `parameters { key: ... value: { string_value: ... } }` entry."""
        if key in self.proto.parameters:
            return self.proto.parameters[key].string_value
        return default

    def bool_parameter(self, key: str, default: bool) -> bool:
        """A true/false parameter (1/0, yes/no, on/off too); an empty or absent one is
        `default`, anything else a ConfigError naming the parameter."""
        text = self.parameter(key)
        if text is None or not text.strip():
            return default
        value = bool_of(text)
        if value is None:
            raise ConfigError(self.name, f"parameters.{key}: expected {BOOLEAN_WORDS}, got '{text}'")
        return value

    def int_parameter(self, key: str, default: int | None, minimum: int = 0) -> int | None:
        """An integer parameter of at least `minimum`; an empty or absent one is `default`,
        anything else a ConfigError naming the parameter."""
        text = self.parameter(key)
        if text is None or not text.strip():
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(self.name, f"parameters.{key}: expected an integer, got '{text}'") from None
        if value < minimum:
            raise ConfigError(self.name, f"parameters.{key}: must be at least {minimum}, got {value}")
        return value

    @property
    def parameters(self) -> dict[str, str]:
        return {k: v.string_value for k, v in self.proto.parameters.items()}

    def to_json_dict(self) -> dict[str, Any]:
        """Triton's JSON form of the config (proto field names, every field present, 64-bit
        integers as JSON numbers as Triton writes them, not protobuf's strings)."""
        data = json_format.MessageToDict(
            self.proto,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )
        int64_as_numbers(data, self.proto.DESCRIPTOR)
        return data

    def copy(self) -> ModelConfig:
        proto = pb.ModelConfig()
        proto.CopyFrom(self.proto)
        return ModelConfig(proto, dict(self._labels), self._written)


_INT64_TYPES = frozenset(
    (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    )
)


def int64_as_numbers(data: dict[str, Any], descriptor: Any) -> None:
    """Turn the strings protobuf's JSON mapping writes for 64-bit integers back into numbers."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            entry = message.fields_by_name["value"]
            for key, item in value.items():
                if entry.message_type is not None:
                    int64_as_numbers(item, entry.message_type)
                elif entry.type in _INT64_TYPES:
                    value[key] = int(item)
        elif message is not None:
            for item in value if isinstance(value, list) else [value]:
                int64_as_numbers(item, message)
        elif field.type in _INT64_TYPES:
            data[field.name] = [int(v) for v in value] if isinstance(value, list) else int(value)


def parse_config_text(text: str, model: str) -> pb.ModelConfig:
    """Parse protobuf text; a syntax error or unknown field names the model and the line."""
    proto = pb.ModelConfig()
    try:
        text_format.Parse(text, proto)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        unknown = describe_unknown_field(str(exc))
        if unknown is not None:
            raise ConfigError(model, f"config.pbtxt line {line}: {unknown}", line, column) from None
        raise ConfigError(model, f"config.pbtxt does not parse: {exc}", line, column) from None
    _check_enums(proto, model, "config.pbtxt")
    return proto


def config_from_dict(data: dict[str, Any], model: str) -> pb.ModelConfig:
    """Parse Triton's JSON form of a config (the load API's config override)."""
    proto = pb.ModelConfig()
    try:
        json_format.ParseDict(data, proto)
    except json_format.ParseError as exc:
        unknown = describe_unknown_field(str(exc))
        if unknown is not None:
            raise ConfigError(model, f"config JSON: {unknown}") from None
        raise ConfigError(model, f"config JSON does not parse: {exc}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # ParseDict lets some conversions escape unwrapped (int(-Infinity) for an enum).
        raise ConfigError(model, f"config JSON does not parse: {exc}") from None
    except RecursionError:
        raise ConfigError(model, "config JSON does not parse: it is nested too deeply") from None
    _check_enums(proto, model, "config JSON")
    return proto


def _check_enums(message: Any, model: str, source: str, path: str = "") -> None:
    """Refuse an enum field holding a number its enum does not define (`data_type: 99`,
    `"kind": -2`): both parsers keep such numbers, and every later `Name()` of them fails."""
    for field, value in message.ListFields():
        where = f"{path}{field.name}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                for key, entry in value.items():
                    _check_enums(entry, model, source, f"{where}[{key}].")
            continue
        repeated = field.is_repeated
        items = list(value) if repeated else [value]
        for index, item in enumerate(items):
            at = f"{where}[{index}]" if repeated else where
            if field.enum_type is not None and item not in field.enum_type.values_by_number:
                raise ConfigError(
                    model,
                    f"{source} does not parse: {at}: {item} is not a value of {field.enum_type.name} (known: "
                    + ", ".join(v.name for v in field.enum_type.values)
                    + ")",
                )
            if field.message_type is not None:
                _check_enums(item, model, source, f"{at}.")


def resolve_backend(proto: pb.ModelConfig, model: str, version_dirs: list[Path]) -> None:
    """Fill `backend` and `platform` the way Triton does: platform names a backend; with
    neither, the model file in a version directory decides, else a model name of the form
    `<anything>.<backend>`."""
    if proto.platform and not proto.backend:
        backend = PLATFORM_TO_BACKEND.get(proto.platform)
        if backend is None:
            raise ConfigError(
                model,
                f"platform: unknown platform '{proto.platform}' (known: "
                + ", ".join(sorted(PLATFORM_TO_BACKEND))
                + ")",
            )
        proto.backend = "" if backend == "ensemble" else backend
    elif proto.backend and not proto.platform:
        proto.platform = BACKEND_TO_PLATFORM.get(proto.backend, "")
        if proto.backend == "pytorch" and not proto.default_model_filename:
            # Only this way does Triton name the PyTorch file in the config it reports.
            proto.default_model_filename = "model.pt"
    if proto.platform or proto.backend:
        return
    names = [proto.default_model_filename] if proto.default_model_filename else list(FILENAME_TO_BACKEND)
    for directory in version_dirs:
        for filename in names:
            if (directory / filename).exists() and filename in FILENAME_TO_BACKEND:
                proto.backend, proto.platform = FILENAME_TO_BACKEND[filename]
                return
    # As Triton: a model named `<anything>.<backend>` is served by that backend.
    _, dot, suffix = model.partition(".")
    if dot and suffix:
        proto.backend = suffix
        proto.default_model_filename = f"model.{suffix}"
        return
    raise ConfigError(
        model,
        f"Invalid model name: Could not determine backend for model '{model}' with no backend in model "
        "configuration. Expected model name of the form 'model.<backend_name>'. (The config names neither "
        "'platform' nor 'backend', and no version directory holds a model file that identifies one: "
        + ", ".join(FILENAME_TO_BACKEND)
        + ")",
    )


def validate_config(
    proto: pb.ModelConfig, model: str, model_dir: Path | None = None, written: frozenset[str] = frozenset()
) -> ModelConfig:
    """Check everything the server relies on; returns the typed config or raises ConfigError.
    `written`: the fields the user's config gives (`ModelConfig.user_wrote`)."""
    for _, check in validation_checks():
        check(proto, model)
    labels = _read_labels(proto, model, model_dir) if model_dir is not None else {}
    return ModelConfig(proto, labels, written)


def check_config_alone(proto: pb.ModelConfig, model: str, with_io: bool) -> None:
    """The checks that need nothing but the config, in Triton's order, run before a load
    looks at any file. `with_io` adds the inputs and outputs, which a config may leave for
    auto-complete to fill in (Triton checks them then only after the backend did)."""
    for _, check in config_alone_checks(with_io):
        check(proto, model)


def config_alone_checks(with_io: bool) -> list[tuple[str, ConfigCheck]]:
    """`check_config_alone`'s checks, in order, each with the field it is about: a load
    stops at the first fault, `naiad check` runs every one (each reads a part of its own)."""
    checks = [
        *MODEL_WIDE_CHECKS,
        ("version_policy", _validate_version_policy),
        ("sequence_batching.state", _validate_sequence_state),
    ]
    if with_io:
        checks += [("input", check_io), ("input", _refuse_duplicate_tensors)]
    checks += [("name", _check_name), ("default_model_filename", _check_default_model_filename)]
    return checks


def validation_checks() -> list[tuple[str, ConfigCheck]]:
    """`validate_config`'s checks (its label files aside), in order, each with the field
    it is about."""
    return [
        *config_alone_checks(with_io=True),
        ("instance_group", _validate_instance_groups),
        ("instance_group", _validate_sizes),
    ]


def _check_name(proto: pb.ModelConfig, model: str) -> None:
    if not proto.name:
        proto.name = model
    elif proto.name != model:
        # Triton's words.
        raise ConfigError(
            model,
            f"unexpected directory name '{model}' for model '{proto.name}', directory name must equal model name",
        )


def _check_default_model_filename(proto: pb.ModelConfig, model: str) -> None:
    if proto.default_model_filename and inside_directory(proto.default_model_filename) is None:
        raise ConfigError(
            model,
            f"default_model_filename: '{proto.default_model_filename}' must name a file inside the version directory",
        )


def _refuse_duplicate_tensors(proto: pb.ModelConfig, model: str) -> None:
    groups: tuple[tuple[str, Sequence[pb.ModelInput | pb.ModelOutput]], ...] = (
        ("input", proto.input),
        ("output", proto.output),
    )
    for kind, tensors in groups:
        seen: set[str] = set()
        for index, tensor in enumerate(tensors):
            if tensor.name in seen:
                raise ConfigError(
                    model, f"{kind} '{tensor.name}' ({kind}[{index}].name): duplicate {kind} name '{tensor.name}'"
                )
            seen.add(tensor.name)


def _validate_version_policy(proto: pb.ModelConfig, model: str) -> None:
    policy = proto.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "latest" and policy.latest.num_versions < 1:
        raise ConfigError(model, "version_policy.latest.num_versions: must be at least 1")
    if choice == "specific":
        versions = list(policy.specific.versions)
        if not versions:
            raise ConfigError(model, "version_policy.specific.versions: must list at least one version")
        bad = [v for v in versions if v < 1]
        if bad:
            raise ConfigError(model, f"version_policy.specific.versions: versions must be positive, got {bad}")


def _validate_sequence_state(proto: pb.ModelConfig, model: str) -> None:
    for state in proto.sequence_batching.state:
        if not state.input_name or not state.output_name:
            raise ConfigError(model, "sequence_batching.state: input_name and output_name are required")
        if state.data_type == pb.TYPE_INVALID:
            raise ConfigError(model, f"sequence_batching.state '{state.input_name}'.data_type: missing or unknown")


def _validate_instance_groups(proto: pb.ModelConfig, model: str) -> None:
    names: set[str] = set()
    for index, group in enumerate(proto.instance_group):
        if group.count < 0:
            raise ConfigError(model, f"instance_group[{index}].count: must not be negative, got {group.count}")
        if group.name:
            if group.name in names:
                raise ConfigError(model, f"instance_group[{index}].name: duplicate group name '{group.name}'")
            names.add(group.name)
        if any(g < 0 for g in group.gpus):
            raise ConfigError(model, f"instance_group[{index}].gpus: GPU ids must not be negative")


def _validate_sizes(proto: pb.ModelConfig, model: str) -> None:
    """Refuse counts past the bounds above, naming the field (GPU groups without a `gpus`
    list multiply by the machine's GPUs later, `expand_instance_groups` checks that total)."""
    instances = sum(max(g.count, 1) * max(len(g.gpus), 1) for g in proto.instance_group) or 1
    if instances > MAX_INSTANCES:
        raise ConfigError(
            model, f"instance_group: {instances} instances in all; a model version may have at most {MAX_INSTANCES}"
        )
    levels = proto.dynamic_batching.priority_levels
    if levels > MAX_PRIORITY_LEVELS:
        raise ConfigError(
            model, f"dynamic_batching.priority_levels: {levels} levels; at most {MAX_PRIORITY_LEVELS} are supported"
        )
    if proto.HasField("sequence_batching"):
        sb = proto.sequence_batching
        if sb.WhichOneof("strategy_choice") == "oldest":
            field, per_instance = "sequence_batching.oldest.max_candidate_sequences", sb.oldest.max_candidate_sequences
        else:
            field, per_instance = "max_batch_size", proto.max_batch_size
        if max(per_instance, 1) * instances > MAX_SEQUENCE_SLOTS:
            raise ConfigError(
                model,
                f"{field}: {per_instance} sequence slots for each of {instances} instance(s); a model version may "
                f"have at most {MAX_SEQUENCE_SLOTS} slots in all",
            )


def _read_labels(proto: pb.ModelConfig, model: str, model_dir: Path) -> dict[str, tuple[str, ...]]:
    labels: dict[str, tuple[str, ...]] = {}
    for index, output in enumerate(proto.output):
        if not output.label_filename:
            continue
        relative = inside_directory(output.label_filename)
        if relative is None:
            # Triton's words; the config may come from a client (a load's config override).
            raise ConfigError(
                model,
                f"label file path '{output.label_filename}' for output '{output.name}' in model '{model}' is "
                "outside model directory",
            )
        path = model_dir / relative
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(
                model,
                f"output '{output.name}' (output[{index}].label_filename): cannot read {path.name}: {exc.strerror}",
            ) from None
        labels[output.name] = tuple(lines)
    return labels
