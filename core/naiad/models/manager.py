"""Loads, serves and unloads model versions.

A load builds every version completely (backend model, instances, scheduler) beside what
is serving, then swaps it in; the replaced versions stop taking requests and finish what
they have before they are finalized. A failed load leaves what was serving untouched and
records the reason for the repository index.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config.ensemble_validation import describe_ensemble_cycle, find_ensemble_cycle, step_model_names
from ..config.model_config import ModelConfig, config_from_dict, parse_config_text
from ..errors import ErrorCode, NaiadError
from ..observability.metrics_settings import MetricsSettings
from ..observability.statistics import ModelStatistics
from ..protos import model_config_pb2 as pb
from ..repository.local import ModelSource, Repository, find_models
from ..scheduling.rate_limiter import RateLimiter
from .backend_registry import BackendRegistry
from .building import VersionBuilder, finalize
from .heap import HeapSettler
from .load_progress import report_while_loading
from .records import LoadedVersion, ModelRecord, ModelState, select_version, unknown_model
from .warmup import warm_up

if TYPE_CHECKING:
    from ..backend.service import InferenceService

__all__ = ["ModelManager"]

log = logging.getLogger("naiad.models")


class ModelManager:
    def __init__(
        self,
        repositories: list[Repository],
        backends: BackendRegistry,
        server: InferenceService | None = None,
        auto_complete: bool = True,
        load_timeout_secs: float | None = None,
        load_retry_count: int = 0,
        config_name: str = "",
        rate_limiter: RateLimiter | None = None,
        metrics_settings: MetricsSettings | None = None,
        requests_in_flight: Callable[[], int] | None = None,
    ) -> None:
        self.repositories = repositories
        # One for the whole server: instances of different models share its resources.
        self.rate_limiter = rate_limiter or RateLimiter()
        self.load_timeout_secs = load_timeout_secs
        self.load_retry_count = load_retry_count
        self.config_name = config_name
        self._records: dict[str, ModelRecord] = {}
        self.builder = VersionBuilder(
            backends,
            server,
            auto_complete,
            config_name,
            self.rate_limiter,
            self._step_config,
            metrics_settings,
            requests_in_flight,
        )
        # Freezes the long-lived heap out of the collector's way after loads and unloads.
        self.heap = HeapSettler()
        # Called whenever what serves, or a model's state, changed (the model home tells
        # the front doors).
        self.on_change: Callable[[], None] | None = None

    # -- queries -------------------------------------------------------------------------

    def record(self, name: str) -> ModelRecord:
        record = self._records.get(name)
        if record is None:
            record = self._records[name] = ModelRecord(name)
        return record

    def get(self, name: str, version: str = "") -> LoadedVersion:
        """The version that serves `name`/`version` ("" or "-1": the highest loaded)."""
        record = self._records.get(name)
        if record is None:
            raise NaiadError.not_found(unknown_model(name, version))
        return select_version(name, version, record.serving, record.states)

    def known(self, name: str) -> ModelRecord | None:
        return self._records.get(name)

    def names(self) -> list[str]:
        """Every model this manager has a record of: serving, failed or unloaded."""
        return list(self._records)

    def loaded_names(self) -> list[str]:
        return [name for name, record in self._records.items() if record.serving]

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
                loaded = record.serving.get(version)
                if state == ModelState.READY and loaded is not None and loaded.dependency_problem is not None:
                    # An ensemble whose step model went away serves nothing, as Triton shows it.
                    problem = loaded.dependency_problem()
                    if problem is not None:
                        state, reason = ModelState.UNAVAILABLE, problem
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

    def refresh_repositories(self) -> None:
        """Bring remote repositories' local mirrors up to date (blocking: network I/O)."""
        for repository in self.repositories:
            repository.refresh()

    async def load(
        self,
        name: str,
        config_override: dict[str, Any] | None = None,
        source: ModelSource | None = None,
        while_unchanged: bool = False,
    ) -> None:
        """Load (or reload) every version its policy selects; raise on failure.

        New versions are built beside the serving ones and swapped in when all are ready;
        unchanged versions stay as they are. `source` loads from another directory than
        the repositories (files uploaded with the load request). `while_unchanged` (poll
        mode) drops the build when the model's files changed while it loaded: it may have
        read half old, half new files; the next poll loads it again."""
        record = self.record(name)
        async with record.lock:
            if source is None:
                sources, duplicates = self.sources()
                if name in duplicates:
                    self._fail(record, duplicates[name])
                    raise NaiadError.invalid(duplicates[name])
                source = sources.get(name)
            if source is None:
                message = (
                    f"failed to load '{name}', failed to poll from model repository: no model directory "
                    f"named '{name}' in the model repositories"
                )
                if not record.serving:
                    self._records.pop(name, None)
                    self._changed()
                raise NaiadError.internal(message)
            for version in record.states:
                if version not in record.serving:
                    record.states[version] = (ModelState.LOADING, "")
            self._changed()
            record.fingerprint = source.fingerprint()
            serving = dict(record.serving) if config_override is None else {}
            try:
                await self._load_ensemble_steps(name, source, config_override)
                built = await self._build_with_retries(source, config_override, serving, dict(record.statistics))
                fresh = [v for v in built.values() if v is not serving.get(v.version)]
                try:
                    for loaded in fresh:
                        if loaded.version not in record.serving:
                            record.states[loaded.version] = (ModelState.LOADING, "")
                        # Ready only once warm, as in Triton; an ensemble has no instances to warm.
                        try:
                            await warm_up(loaded.config, loaded.version, source.path, loaded.runners, loaded.statistics)
                        except NaiadError as exc:
                            exc.failed_version = loaded.version  # type: ignore[attr-defined]
                            raise
                    if while_unchanged and source.fingerprint() != record.fingerprint:
                        raise _ChangedWhileLoading(name)
                    for loaded in fresh:
                        await loaded.scheduler.start()
                except BaseException:
                    await self._retire(fresh)
                    raise
            except NaiadError as exc:
                if isinstance(exc, _ChangedWhileLoading):
                    record.fingerprint = None  # the next poll loads it again
                logged = exc.message
                exc.message = source.without_paths(exc.message)
                exc.args = (exc.message,)
                self._fail(record, exc.message, getattr(exc, "failed_version", None), logged)
                raise
            except Exception as exc:  # noqa: BLE001 - a broken backend must not take the server down
                message = f"failed to load '{name}': {type(exc).__name__}: {exc}"
                self._fail(record, source.without_paths(message), logged=message)
                raise NaiadError.internal(source.without_paths(message)) from exc
            retired = [v for v in record.serving.values() if built.get(v.version) is not v]
            record.serving = built
            record.statistics.update({v: loaded.statistics for v, loaded in built.items()})
            record.states = {v: (ModelState.READY, "") for v in built}
            self._changed()
            log.info("successfully loaded '%s' version(s) %s", name, sorted(built))
        await self._retire(retired)
        self.heap.settle_soon()

    async def _build_with_retries(
        self,
        source: ModelSource,
        override: dict[str, Any] | None,
        serving: dict[int, LoadedVersion],
        statistics: dict[int, ModelStatistics],
    ) -> dict[int, LoadedVersion]:
        """`_build_with_timeout`, tried again up to `load_retry_count` times when it fails."""
        retries = 0
        while True:
            try:
                return await self._build_with_timeout(source, override, serving, statistics)
            except Exception as exc:  # noqa: BLE001 - a broken backend must not take the server down
                if retries == self.load_retry_count:
                    raise
                retries += 1
                reason = exc.message if isinstance(exc, NaiadError) else f"{type(exc).__name__}: {exc}"
                log.warning(
                    "model '%s' failed to load (%s); trying again (%d of %d)",
                    source.name,
                    reason,
                    retries,
                    self.load_retry_count,
                )

    async def _build_with_timeout(
        self,
        source: ModelSource,
        override: dict[str, Any] | None,
        serving: dict[int, LoadedVersion],
        statistics: dict[int, ModelStatistics],
    ) -> dict[int, LoadedVersion]:
        """`VersionBuilder.build` in a worker thread, given up on after the load timeout. A thread cannot
        be stopped: what it builds after the deadline is finalized as soon as it is done."""
        build = asyncio.ensure_future(asyncio.to_thread(self.builder.build, source, override, serving, statistics))

        def discard(task: asyncio.Future[dict[int, LoadedVersion]]) -> None:
            # exception() also marks a failure as seen: asyncio would log it as never retrieved.
            if not task.cancelled() and task.exception() is None:
                for loaded in task.result().values():
                    if loaded is not serving.get(loaded.version):
                        finalize(loaded)

        progress = asyncio.create_task(report_while_loading(source.name), name=f"naiad-load-progress-{source.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(build), self.load_timeout_secs)
        except TimeoutError:
            build.add_done_callback(discard)
            raise NaiadError.unavailable(
                f"failed to load '{source.name}': loading took longer than {self.load_timeout_secs}s"
            ) from None
        except asyncio.CancelledError:
            # The load was given up (a gRPC deadline passed, the server stops): what the
            # thread builds after all is finalized, not left running unserved.
            build.add_done_callback(discard)
            raise
        finally:
            progress.cancel()

    async def unload(self, name: str) -> None:
        record = self._records.get(name)
        if record is None:
            raise NaiadError.not_found(f"failed to unload '{name}': model is not loaded")
        async with record.lock:
            retired = list(record.serving.values())
            for loaded in retired:
                record.states[loaded.version] = (ModelState.UNLOADING, "")
            record.serving = {}
            self._changed()
            await self._retire(retired)
            record.states = {v: (ModelState.UNAVAILABLE, "unloaded") for v in record.states}
            self._changed()
            log.info("successfully unloaded '%s'", name)
        self.heap.settle_soon()

    async def unload_all(self, timeout: float | None = None) -> None:
        # Ensembles first, so their in-flight requests can still reach their steps.
        def is_ensemble(name: str) -> bool:
            return any(v.config.platform == "ensemble" for v in self._records[name].serving.values())

        for name in sorted(self._records, key=lambda n: not is_ensemble(n)):
            record = self._records[name]
            retired = list(record.serving.values())
            record.serving = {}
            self._changed()
            await self._retire(retired, timeout)

    def _fail(self, record: ModelRecord, reason: str, version: int | None = None, logged: str | None = None) -> None:
        """Record a failed load: `reason` for the repository index (clients read it),
        `logged` (the whole text, server paths included) for the log."""
        log.error("%s", logged or reason)
        if record.serving:
            # The serving versions stay READY; the failure is reported beside them.
            record.states = {v: (ModelState.READY, "") for v in record.serving}
            if version is not None and version not in record.serving:
                record.states[version] = (ModelState.UNAVAILABLE, reason)
        else:
            versions = [v for v in record.states if v] or [0]
            record.states = {v: (ModelState.UNAVAILABLE, reason) for v in versions}
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def _retire(self, versions: list[LoadedVersion], timeout: float | None = None) -> None:
        for loaded in versions:
            await loaded.scheduler.stop(timeout)
            await asyncio.to_thread(finalize, loaded)

    # -- ensembles -----------------------------------------------------------------------

    def peek_config(self, name: str, sources: dict[str, ModelSource] | None = None) -> pb.ModelConfig | None:
        """A model's config as loaded, else as its repository holds it (None if neither).
        `sources` saves a repository scan when the caller has one."""
        record = self._records.get(name)
        if record is not None and record.serving:
            return record.serving[max(record.serving)].config.proto
        if sources is None:
            try:
                sources, _ = self.sources()
            except NaiadError:
                return None
        source = sources.get(name)
        return _peek_config(source, None, self.config_name) if source is not None else None

    async def _load_ensemble_steps(self, name: str, source: ModelSource, override: dict[str, Any] | None) -> None:
        """Before an ensemble loads: refuse a cycle of ensembles, and load each step model
        that is not serving yet (Triton loads an ensemble's composing models with it)."""
        proto = _peek_config(source, override, self.config_name)
        if proto is None or proto.platform != "ensemble":
            return
        cycle = find_ensemble_cycle(name, proto, self.peek_config)
        if cycle is not None:
            # Triton's words first (it names the first and last ensembles of the loop).
            raise NaiadError.invalid(describe_ensemble_cycle(name, cycle))
        sources, _ = self.sources()
        for step_name in step_model_names(proto):
            record = self._records.get(step_name)
            if (record is not None and record.serving) or step_name not in sources:
                continue  # serving already, or unknown: validation names it
            try:
                await self.load(step_name)
            except NaiadError as exc:
                raise NaiadError(
                    exc.code, f"ensemble '{name}': step model '{step_name}' failed to load: {exc.message}"
                ) from None

    def users(self, name: str) -> list[str]:
        """The loaded ensembles with a step that uses model `name`."""
        return sorted(
            {
                loaded.name
                for loaded in self.ready_models()
                if loaded.config.platform == "ensemble" and name in step_model_names(loaded.config.proto)
            }
        )

    async def unload_unused_steps(self, proto: pb.ModelConfig) -> None:
        """After an ensemble was unloaded with `unload_dependents`: unload its step models
        that no other loaded ensemble uses, nested ensembles' steps included (Triton's
        semantics, checked against its server)."""
        for step_name in step_model_names(proto):
            record = self._records.get(step_name)
            if record is None or not record.serving or self.users(step_name):
                continue
            step_proto = self.peek_config(step_name)
            await self.unload(step_name)
            if step_proto is not None and step_proto.platform == "ensemble":
                await self.unload_unused_steps(step_proto)

    def _step_config(self, model: str, version: int) -> ModelConfig:
        """The config of an ensemble step's model; raises naming why it is not there."""
        record = self._records.get(model)
        if record is None or not (record.serving or record.states):
            try:
                sources, _ = self.sources()
            except NaiadError:
                sources = {}
            if model not in sources:
                raise NaiadError.not_found(f"unknown model '{model}': no such model in the model repository")
        return self.get(model, "" if version in (-1, 0) else str(version)).config


class _ChangedWhileLoading(NaiadError):
    """The model's files changed during its load: what was read may be half old, half new,
    so the build is dropped and the serving versions stay."""

    def __init__(self, name: str) -> None:
        super().__init__(
            ErrorCode.UNAVAILABLE, f"failed to load '{name}': its files changed while it loaded; it will load again"
        )


def _peek_config(source: ModelSource, override: dict[str, Any] | None, config_name: str) -> pb.ModelConfig | None:
    """The config a load would use, or None when it does not parse (the load reports it)."""
    try:
        if override is not None:
            return config_from_dict(override, source.name)
        text = source.config_text(config_name)
        return parse_config_text(text, source.name) if text is not None else None
    except NaiadError:
        return None
