"""Loads, serves and unloads model versions.

A load builds every version completely (backend model, instances, scheduler) beside what
is serving, then swaps it in; the replaced versions stop taking requests and finish what
they have before they are finalized. A failed load leaves what was serving untouched and
records the reason for the repository index.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .backend_abi import Model, ModelContext
from .backend_registry import BackendRegistry
from .errors import NaiadError
from .instance_groups import expand_instance_groups
from .model_config import (
    ConfigError,
    ModelConfig,
    config_from_dict,
    parse_config_text,
    resolve_backend,
    validate_config,
)
from .protos import model_config_pb2 as pb
from .repository import LocalRepository, ModelSource, find_models, select_versions
from .scheduling.direct_scheduler import DirectScheduler
from .scheduling.factory import create_scheduler
from .scheduling.instance_runner import InstanceRunner
from .scheduling.scheduler import Scheduler
from .statistics import ModelStatistics

if TYPE_CHECKING:
    from .server import Server

__all__ = ["ModelManager", "LoadedVersion", "ModelState"]

log = logging.getLogger("naiad.models")


class ModelState:
    """Triton's model state names, as the repository index reports them."""

    READY = "READY"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(eq=False)
class LoadedVersion:
    """One servable model version."""

    name: str
    version: int
    config: ModelConfig
    scheduler: Scheduler
    statistics: ModelStatistics
    model: Model | None = None
    runners: list[InstanceRunner] = field(default_factory=list)

    def is_ready(self) -> bool:
        return self.model is None or self.model.is_ready()


@dataclass(eq=False)
class ModelRecord:
    """Everything known about one model name: what serves, and the index's view."""

    name: str
    serving: dict[int, LoadedVersion] = field(default_factory=dict)
    # Index rows by version (0 when the failure came before versions were known).
    states: dict[int, tuple[str, str]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ModelManager:
    def __init__(
        self,
        repositories: list[LocalRepository],
        backends: BackendRegistry,
        server: "Server | None" = None,
        auto_complete: bool = True,
    ) -> None:
        self.repositories = repositories
        self.backends = backends
        self.server = server
        self.auto_complete = auto_complete
        self._records: dict[str, ModelRecord] = {}

    # -- queries -------------------------------------------------------------------------

    def record(self, name: str) -> ModelRecord:
        record = self._records.get(name)
        if record is None:
            record = self._records[name] = ModelRecord(name)
        return record

    def get(self, name: str, version: str = "") -> LoadedVersion:
        """The version that serves `name`/`version` ("" or "-1": the highest loaded)."""
        record = self._records.get(name)
        if record is None or not record.serving:
            if record is not None and record.states:
                reason = "; ".join(r for _, r in record.states.values() if r)
                raise NaiadError.unavailable(f"model '{name}' is not ready" + (f": {reason}" if reason else ""))
            raise NaiadError.not_found(f"unknown model: '{name}'" if not version else
                                       f"unknown model: '{name}', version '{version}'")
        if version in ("", "-1"):
            return record.serving[max(record.serving)]
        try:
            number = int(version)
        except ValueError:
            raise NaiadError.invalid(f"model '{name}': version '{version}' is not a number") from None
        loaded = record.serving.get(number)
        if loaded is None:
            raise NaiadError.not_found(
                f"model '{name}' has no version {number} loaded (loaded: {sorted(record.serving)})"
            )
        return loaded

    def ready_models(self) -> list[LoadedVersion]:
        return [v for r in self._records.values() for v in r.serving.values()]

    def index(self, ready_only: bool = False) -> list[dict[str, str]]:
        """The repository index: every model in the repositories and every model known,
        with version, state and the reason for an unavailable one."""
        rows: list[dict[str, str]] = []
        names = set(self._records)
        try:
            found, duplicates = find_models(self.repositories)
            names |= set(found) | set(duplicates)
        except NaiadError:
            pass
        for name in sorted(names):
            record = self._records.get(name)
            if record is None or not record.states:
                if not ready_only:
                    rows.append({"name": name})
                continue
            for version in sorted(record.states):
                state, reason = record.states[version]
                if ready_only and state != ModelState.READY:
                    continue
                row = {"name": name, "state": state, "reason": reason}
                if version:
                    row["version"] = str(version)
                rows.append(row)
        return rows

    # -- loading -------------------------------------------------------------------------

    def sources(self) -> tuple[dict[str, ModelSource], dict[str, str]]:
        return find_models(self.repositories)

    async def load(self, name: str, config_override: dict[str, Any] | None = None) -> None:
        """Load (or reload) every version its policy selects; raise on failure."""
        record = self.record(name)
        async with record.lock:
            sources, duplicates = self.sources()
            if name in duplicates:
                self._fail(record, duplicates[name])
                raise NaiadError.invalid(duplicates[name])
            source = sources.get(name)
            if source is None:
                message = f"failed to load '{name}', failed to poll from model repository: no model directory named '{name}'"
                if not record.serving:
                    self._records.pop(name, None)
                raise NaiadError.not_found(message)
            for version in record.states:
                if version not in record.serving:
                    record.states[version] = (ModelState.LOADING, "")
            try:
                built = await asyncio.to_thread(self._build, source, config_override)
                for loaded in built.values():
                    await loaded.scheduler.start()
            except NaiadError as exc:
                self._fail(record, exc.message)
                raise
            except Exception as exc:  # noqa: BLE001 - a broken backend must not take the server down
                message = f"failed to load '{name}': {type(exc).__name__}: {exc}"
                self._fail(record, message)
                raise NaiadError.internal(message) from exc
            retired = list(record.serving.values())
            record.serving = built
            record.states = {v: (ModelState.READY, "") for v in built}
            log.info("loaded model '%s' version(s) %s", name, sorted(built))
        await self._retire(retired)

    async def unload(self, name: str) -> None:
        record = self._records.get(name)
        if record is None:
            raise NaiadError.not_found(f"failed to unload '{name}': model is not loaded")
        async with record.lock:
            retired = list(record.serving.values())
            for loaded in retired:
                record.states[loaded.version] = (ModelState.UNLOADING, "")
            record.serving = {}
            await self._retire(retired)
            record.states = {v: (ModelState.UNAVAILABLE, "unloaded") for v in record.states}
            log.info("unloaded model '%s'", name)

    async def unload_all(self, timeout: float | None = None) -> None:
        for name in list(self._records):
            record = self._records[name]
            retired = list(record.serving.values())
            record.serving = {}
            await self._retire(retired, timeout)

    def _fail(self, record: ModelRecord, reason: str) -> None:
        log.error("%s", reason)
        if record.serving:
            # The old versions keep serving; the failure is reported beside them.
            return
        versions = [v for v in record.states] or [0]
        record.states = {v: (ModelState.UNAVAILABLE, reason) for v in versions}

    async def _retire(self, versions: list[LoadedVersion], timeout: float | None = None) -> None:
        for loaded in versions:
            await loaded.scheduler.stop(timeout)
            await asyncio.to_thread(self._finalize, loaded)

    @staticmethod
    def _finalize(loaded: LoadedVersion) -> None:
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

    def _build(self, source: ModelSource, override: dict[str, Any] | None) -> dict[int, LoadedVersion]:
        """Runs in a worker thread: framework loads block."""
        name = source.name
        if override is not None:
            proto = config_from_dict(override, name)
        else:
            text = source.config_text()
            if text is None and not self.auto_complete:
                raise ConfigError(name, "config.pbtxt: not found, and auto-complete is disabled")
            proto = parse_config_text(text or "", name)
        available = source.versions()
        resolve_backend(proto, name, [source.version_path(v) for v in reversed(available)])
        # The policy can only be read after parsing; validate it before choosing versions.
        validate_config(_policy_only(proto), name)
        versions = select_versions(proto.version_policy, available, name)
        built: dict[int, LoadedVersion] = {}
        try:
            for version in versions:
                built[version] = self._build_version(source, proto, version)
        except BaseException:
            for loaded in built.values():
                self._finalize(loaded)
            raise
        return built

    def _build_version(self, source: ModelSource, base: pb.ModelConfig, version: int) -> LoadedVersion:
        name = source.name
        proto = pb.ModelConfig()
        proto.CopyFrom(base)
        if proto.platform == "ensemble":
            raise NaiadError.unsupported(f"model '{name}': ensembles are not supported yet")
        backend = self.backends.get(proto.backend)
        filename = proto.default_model_filename or backend.default_model_filename
        provisional = ModelConfig(proto)
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
        if self.auto_complete:
            model.auto_complete_config(provisional)
        config = validate_config(proto, name, source.path)
        context.config = config
        runners: list[InstanceRunner] = []
        statistics = ModelStatistics(name, str(version))
        try:
            model.initialize()
            for instance_context in expand_instance_groups(config):
                instance = model.create_instance(instance_context)
                instance.initialize()
                runners.append(InstanceRunner(instance, statistics, name, str(version), config.decoupled))
            scheduler = create_scheduler(config, runners)
        except BaseException:
            loaded = LoadedVersion(name, version, config, DirectScheduler([]), statistics, model, runners)
            self._finalize(loaded)
            raise
        return LoadedVersion(name, version, config, scheduler, statistics, model, runners)


def _policy_only(proto: pb.ModelConfig) -> pb.ModelConfig:
    """A copy holding just what validation needs to check the version policy early."""
    copy = pb.ModelConfig(name=proto.name)
    copy.version_policy.CopyFrom(proto.version_policy)
    return copy
