"""The rules Triton applies to a whole config before it looks at any model file: batch
size, dynamic and sequence batching, ensemble scheduling, response cache, model metrics.

They need nothing but the config, so a load runs them first: a broken config is reported
as such even when its model directory has no version or model file yet. Messages carry
Triton's wording (clients and scripts match on them); `check_model_wide` puts the model's
name in front, as every naiad config error does.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protos import model_config_pb2 as pb
from .config_error import ConfigError
from .ensemble_graph_checks import ensemble_graph_problem

__all__ = ["MODEL_WIDE_CHECKS", "ConfigCheck", "check_model_wide", "check_model_metrics"]

_Control = pb.ModelSequenceBatching.Control
_BOOLEAN_CONTROLS = (_Control.CONTROL_SEQUENCE_START, _Control.CONTROL_SEQUENCE_END, _Control.CONTROL_SEQUENCE_READY)
_CORRID_TYPES = frozenset((pb.TYPE_UINT64, pb.TYPE_INT64, pb.TYPE_UINT32, pb.TYPE_INT32, pb.TYPE_STRING))


def check_model_wide(proto: pb.ModelConfig, model: str) -> None:
    """Raise ConfigError for the first model-wide field Triton would refuse."""
    for _, check in MODEL_WIDE_CHECKS:
        check(proto, model)


def check_model_metrics(proto: pb.ModelConfig, model: str) -> None:
    """Every `model_metrics.metric_control` names a metric family and gives it buckets."""
    for control in proto.model_metrics.metric_control:
        if not control.HasField("metric_identifier"):
            raise ConfigError(model, "metric control must specify 'metric_identifier'")
        if not control.metric_identifier.family:
            raise ConfigError(model, "metric identifier must specify non-empty 'family'")
        if not control.HasField("histogram_options"):
            raise ConfigError(model, "metric control must specify 'histogram_options'")
        if not control.histogram_options.buckets:
            raise ConfigError(model, "histogram options must specify non-empty 'buckets'")


def _batch_size_problem(proto: pb.ModelConfig, name: str) -> str | None:
    if proto.max_batch_size < 0:
        return f"'max_batch_size' must be non-negative value for {name}"
    return None


def _dynamic_batching_problem(proto: pb.ModelConfig, name: str) -> str | None:
    if not proto.HasField("dynamic_batching"):
        return None
    batching = proto.dynamic_batching
    for size in batching.preferred_batch_size:
        if size <= 0:
            return f"dynamic batching preferred size must be positive for {name}"
        if size > proto.max_batch_size:
            return f"dynamic batching preferred size must be <= max batch size for {name}"
    levels = batching.priority_levels
    if levels != 0:
        if not 1 <= batching.default_priority_level <= levels:
            return f"default priority level must be in range [1, {levels}] for {name}"
        for level in batching.priority_queue_policy:
            if not 1 <= level <= levels:
                return f"priority queue policy must have priority level in range [1, {levels}] for {name}"
    if batching.preserve_ordering:
        # Priorities and delayed requests would both let a later request overtake.
        if levels > 1:
            return f"Only one priority level is allowed when 'preserve_ordering' is true for {name}"
        policies = [batching.default_queue_policy, *batching.priority_queue_policy.values()]
        for policy in policies:
            if policy.default_timeout_microseconds != 0 and policy.timeout_action == pb.ModelQueuePolicy.DELAY:
                return f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}"
    return None


def _sequence_batching_problem(proto: pb.ModelConfig, name: str) -> str | None:
    if not proto.HasField("sequence_batching"):
        return None
    if proto.response_cache.enable:
        return (
            f"Response Cache does not currently support model {name} with sequence batching scheduler. "
            "Please disable the response cache."
        )
    batcher = proto.sequence_batching
    for kind in (*_BOOLEAN_CONTROLS, _Control.CONTROL_SEQUENCE_CORRID):
        problem = _control_problem(batcher, name, kind)
        if problem is not None:
            return problem
    if batcher.HasField("oldest"):
        for size in batcher.oldest.preferred_batch_size:
            if size <= 0:
                return f"sequence batching preferred batch size must be positive for {name}"
            if size > proto.max_batch_size:
                return f"sequence batching preferred batch size must be <= max batch size for {name}"
    if batcher.HasField("direct") and not 0.0 <= batcher.direct.minimum_slot_utilization <= 1.0:
        return f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}"
    return None


def _control_problem(batcher: pb.ModelSequenceBatching, name: str, kind: int) -> str | None:
    """What is wrong with the control inputs as seen for one control kind, in the order
    Triton checks them (a tensor named twice is found whichever kind is looked at)."""
    kind_name = _Control.Kind.Name(kind)
    seen_tensors: set[str] = set()
    seen_control = False
    for control_input in batcher.control_input:
        if not control_input.name:
            return f"sequence batching control tensor must have a name for {name}"
        if control_input.name in seen_tensors:
            return (
                f"sequence batching control tensor '{control_input.name}' is specified for multiple control "
                f"kinds for {name}"
            )
        seen_tensors.add(control_input.name)
        for control in control_input.control:
            if control.kind != kind:
                continue
            if seen_control:
                return f"sequence batching specifies multiple {kind_name} tensors for {name}"
            seen_control = True
            problem = _control_values_problem(control, kind, kind_name, name)
            if problem is not None:
                return problem
    return None


def _control_values_problem(
    control: pb.ModelSequenceBatching.Control, kind: int, kind_name: str, name: str
) -> str | None:
    given = [
        (field, len(values))
        for field, values in (
            ("int32_false_true", control.int32_false_true),
            ("fp32_false_true", control.fp32_false_true),
            ("bool_false_true", control.bool_false_true),
        )
        if values
    ]
    if kind == _Control.CONTROL_SEQUENCE_CORRID:
        if given:
            return (
                "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or "
                f"'bool_false_true' for {kind_name} for {name}"
            )
        if control.data_type not in _CORRID_TYPES:
            return (
                f"unexpected data type for control {kind_name} for {name}. Allowed data types are TYPE_UINT64, "
                "TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
            )
        return None
    if not given:
        return (
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' "
            f"for {kind_name} for {name}"
        )
    if len(given) > 1:
        return (
            "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and "
            f"'bool_false_true' for {kind_name} for {name}"
        )
    field, count = given[0]
    if count != 2:
        return f"sequence batching control '{field}' must have exactly 2 entries for {kind_name} for {name}"
    return None


def _ensemble_problem(proto: pb.ModelConfig, name: str) -> str | None:
    is_ensemble = proto.platform == "ensemble"
    if is_ensemble and proto.backend:
        return f"Ensemble model '{name}' must have platform type 'ensemble' and empty backend type"
    if not proto.HasField("ensemble_scheduling"):
        if is_ensemble:
            return f"ensemble scheduling must be set for ensemble {name} whose platform is ensemble"
        return None
    if not is_ensemble:
        return f"ensemble scheduling cannot be set for model '{name}' whose platform is not ensemble"
    if proto.instance_group:
        return f"instance group should not be specified for ensemble '{name}'"
    if proto.HasField("optimization"):
        return f"optimization should not be specified for ensemble '{name}'"
    if proto.model_warmup:
        return f"model_warmup can not be specified for ensemble '{name}'"
    if not proto.ensemble_scheduling.step:
        return f"must specify 'step' for ensemble '{name}'"
    for index, step in enumerate(proto.ensemble_scheduling.step):
        for field in ("model_name", "input_map", "output_map"):
            if not getattr(step, field):
                return f"must specify '{field}' in step {index} of ensemble '{name}'"
    return ensemble_graph_problem(proto, name)


def _decoupled_cache_check(proto: pb.ModelConfig, model: str) -> None:
    if proto.model_transaction_policy.decoupled and proto.response_cache.enable:
        raise ConfigError(
            model,
            f"Response Cache does not currently support model {proto.name or model} with 'decoupled' transaction "
            "policy. Please disable the response cache.",
        )


# A check of a config: raises ConfigError (the model's name, then the fault) or returns.
ConfigCheck = Callable[[pb.ModelConfig, str], None]


def _raising(problem: Callable[[pb.ModelConfig, str], str | None]) -> ConfigCheck:
    def check(proto: pb.ModelConfig, model: str) -> None:
        found = problem(proto, proto.name or model)
        if found is not None:
            raise ConfigError(model, found)

    return check


# (the field a check is about, the check), in Triton's order. A load stops at the first
# fault; `naiad check` runs each, since each looks at a part of the config of its own.
MODEL_WIDE_CHECKS: tuple[tuple[str, ConfigCheck], ...] = (
    ("max_batch_size", _raising(_batch_size_problem)),
    ("dynamic_batching", _raising(_dynamic_batching_problem)),
    ("sequence_batching", _raising(_sequence_batching_problem)),
    ("ensemble_scheduling", _raising(_ensemble_problem)),
    ("response_cache", _decoupled_cache_check),
    ("model_metrics", check_model_metrics),
)
