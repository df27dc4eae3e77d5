"""Builds a model's versions: the config read, auto-completed and validated, the backend
model and its instances created, the scheduler chosen. It runs in a worker thread
(framework loads block); the model manager decides when to build and swaps in what is built.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backend.abi import ModelContext
from ..cache.response_cache import check_cache_config
from ..config.instance_group_checks import check_instance_groups
from ..config.model_config import (
    FILENAME_TO_BACKEND,
    ConfigError,
    ModelConfig,
    check_config_alone,
    config_from_dict,
    parse_config_text,
    resolve_backend,
    validate_config,
)
from ..config.unacted import unacted_fields
from ..config.written_fields import fields_written_in_dict, fields_written_in_text
from ..devices import gpu_ids
from ..errors import NaiadError
from ..observability.metrics_settings import MetricsSettings, warn_unknown_metric_families
from ..observability.statistics import ModelStatistics
from ..protos import model_config_pb2 as pb
from ..repository.local import ModelSource, select_versions
from ..scheduling.direct_scheduler import DirectScheduler
from ..scheduling.ensemble_scheduler import EnsembleScheduler
from ..scheduling.factory import create_scheduler
from ..scheduling.instance_runner import InstanceRunner
from ..scheduling.rate_limiter import InstanceGate, RateLimiter
from .backend_registry import BackendRegistry
from .config_completion import Written, auto_gpus, complete_config, complete_ensemble
from .instance_groups import expand_instance_groups
from .records import LoadedVersion

if TYPE_CHECKING:
    from ..backend.service import InferenceService

__all__ = ["MISSING_CONFIG", "VersionBuilder", "finalize", "misplaced_model_file", "refuse_misplaced_model_file"]

log = logging.getLogger("naiad.models")

# A model without config.pbtxt loads only when auto-complete may write one.
MISSING_CONFIG = "config.pbtxt: not found, and auto-complete is disabled"


class VersionBuilder:
    """Builds the versions of one model at a time from its source (the model manager owns
    one, and serializes builds per model name)."""

    def __init__(
        self,
        backends: BackendRegistry,
        server: InferenceService | None,
        auto_complete: bool,
        config_name: str,
        rate_limiter: RateLimiter,
        step_config: Callable[[str, int], ModelConfig],
        metrics_settings: MetricsSettings | None = None,
        requests_in_flight: Callable[[], int] | None = None,
    ) -> None:
        self.backends = backends
        self.server = server
        self.auto_complete = auto_complete
        self.config_name = config_name
        self.rate_limiter = rate_limiter
        # An ensemble step's config, by model name and version (the manager's view).
        self._step_config = step_config
        # How many requests the server has in flight (instance runners ask; see inline_execution).
        self._requests_in_flight = requests_in_flight
        # The opt-in latency summaries and histograms each new version's statistics keep.
        self.metrics_settings = metrics_settings

    def build(
        self,
        source: ModelSource,
        override: dict[str, Any] | None,
        serving: dict[int, LoadedVersion],
        statistics: dict[int, ModelStatistics],
    ) -> dict[int, LoadedVersion]:
        """Runs in a worker thread: framework loads block. Versions of `serving` whose
        files did not change are reused as they are; new ones continue the counters in
        `statistics`."""
        name = source.name
        if override is not None:
            proto = config_from_dict(override, name)
            written = fields_written_in_dict(override, pb.ModelConfig.DESCRIPTOR)
            written_in = "the config override"
        else:
            text = source.config_text(self.config_name)
            if text is None and not self.auto_complete:
                raise ConfigError(name, MISSING_CONFIG)
            proto = parse_config_text(text or "", name)
            written = fields_written_in_text(text or "", pb.ModelConfig.DESCRIPTOR)
            written_in = source.config_path(self.config_name).name
        # As in Triton, a broken config is reported before any model file is looked for;
        # inputs and outputs wait for auto-complete where it may fill them in.
        check_config_alone(proto, name, with_io=not self.auto_complete)
        warn_unknown_metric_families(proto, name)
        available = source.versions()
        refuse_misplaced_model_file(source, proto, available)
        resolve_backend(proto, name, [source.version_path(v) for v in reversed(available)])
        for field, why in unacted_fields(proto):
            log.warning("model '%s': config field '%s' has no effect in naiad: %s", name, field, why)
        versions = select_versions(proto.version_policy, available, name)
        model_files = source.model_fingerprint()
        built: dict[int, LoadedVersion] = {}
        try:
            for version in versions:
                fingerprint = (model_files, source.version_fingerprint(version))
                current = serving.get(version)
                if current is not None and current.fingerprint == fingerprint:
                    built[version] = current
                    continue
                try:
                    built[version] = self._build_version(
                        source, proto, version, statistics.get(version), Written(written, written_in)
                    )
                except NaiadError as exc:
                    exc.failed_version = version  # type: ignore[attr-defined]
                    raise
                built[version].fingerprint = fingerprint
        except BaseException:
            for loaded in built.values():
                if loaded is not serving.get(loaded.version):
                    finalize(loaded)
            raise
        return built

    def _build_version(
        self,
        source: ModelSource,
        base: pb.ModelConfig,
        version: int,
        statistics: ModelStatistics | None,
        written: Written,
    ) -> LoadedVersion:
        name = source.name
        log.info("loading: %s:%d", name, version)
        load_started = time.monotonic()
        proto = pb.ModelConfig()
        proto.CopyFrom(base)
        if proto.platform == "ensemble":
            return self._build_ensemble(source, proto, version)
        check_instance_groups(proto, name, gpu_ids())
        backend = self.backends.get(proto.backend)
        filename = proto.default_model_filename or backend.default_model_filename
        provisional = ModelConfig(proto, written=written.fields)
        context = ModelContext(
            name=name,
            version=version,
            path=source.path,
            version_path=source.version_path(version),
            config=provisional,
            model_filename=filename,
            server=self.server,
        )
        model = backend.create_model(context)
        for _, change in complete_config(model, provisional, filename, written, self.auto_complete, auto_gpus(backend)):
            log.warning("model '%s': %s", name, change)
        config = validate_config(proto, name, source.path, written.fields)
        check_cache_config(config)
        context.config = config
        runners: list[InstanceRunner] = []
        if statistics is None:
            statistics = ModelStatistics(name, str(version))
        if self.metrics_settings is not None:
            self.metrics_settings.prepare(statistics, config)
        gates: list[InstanceGate | None] = []
        try:
            contexts = expand_instance_groups(config)
            gates = self.rate_limiter.admit(config.proto, [(c.group_name, c.device_id) for c in contexts])
            model.initialize()
            for instance_context, gate in zip(contexts, gates):
                instance = model.create_instance(instance_context)
                instance.initialize()
                runners.append(
                    InstanceRunner(
                        instance, statistics, name, str(version), config.decoupled, gate, self._requests_in_flight
                    )
                )
            scheduler = create_scheduler(config, runners)
        except BaseException:
            loaded = LoadedVersion(name, version, config, DirectScheduler([]), statistics, model, runners)
            finalize(loaded)
            for gate in gates[len(runners) :]:
                if gate is not None:
                    gate.close()  # instances that were never created
            raise
        statistics.load_duration_s = time.monotonic() - load_started
        return LoadedVersion(name, version, config, scheduler, statistics, model, runners)

    def _build_ensemble(self, source: ModelSource, proto: pb.ModelConfig, version: int) -> LoadedVersion:
        name = source.name
        if self.server is None:
            raise NaiadError.internal(f"ensemble '{name}' needs a server to run its steps")
        config, plan = complete_ensemble(proto, name, source.path, self._step_config)
        check_cache_config(config)
        statistics = ModelStatistics(name, str(version))
        scheduler = EnsembleScheduler(self.server, config, plan, statistics, str(version), self._step_config)
        return LoadedVersion(name, version, config, scheduler, statistics, dependency_problem=scheduler.problem)


def misplaced_model_file(source: ModelSource, proto: pb.ModelConfig) -> str | None:
    """The model file that lies beside config.pbtxt instead of in a version directory."""
    if proto.platform == "ensemble":
        return None
    names = [proto.default_model_filename] if proto.default_model_filename else list(FILENAME_TO_BACKEND)
    return source.misplaced_model_file(names)


def refuse_misplaced_model_file(source: ModelSource, proto: pb.ModelConfig, available: list[int]) -> None:
    misplaced = misplaced_model_file(source, proto)
    if misplaced is None:
        return
    version = available[-1] if available else 1
    # The server log shows the whole path; clients read it relative to the model directory
    # (the manager cuts server paths from what they see).
    raise ConfigError(
        source.name,
        f"{misplaced} lies beside config.pbtxt, but model files belong in numbered version directories: "
        f"move it into {version}/ ({source.version_path(version) / misplaced})",
    )


def finalize(loaded: LoadedVersion) -> None:
    """Finalize a version's instances, then its model; a failure is logged, not raised."""
    for runner in loaded.runners:
        try:
            runner.instance.finalize()
        except Exception:  # noqa: BLE001
            log.exception("model '%s' instance %s failed to finalize", loaded.name, runner.name)
        runner.close()
    if loaded.model is not None:
        try:
            loaded.model.finalize()
        except Exception:  # noqa: BLE001
            log.exception("model '%s' failed to finalize", loaded.name)
