"""`naiad.Server`: the inference server without sockets.

Frontends (HTTP, gRPC) are thin layers on this class; an application can embed it
directly::

    async with Server(ServerOptions(model_repositories=["models"])) as server:
        response = await server.infer(InferenceRequest("add_sub", inputs=[...]))
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from .cache.response_cache import CacheSpec, ResponseCache, open_cache
from .classification import apply_classification
from .config.ensemble_validation import load_order
from .config.model_config import ModelConfig
from .config.request_plan import RequestPlan
from .errors import ErrorCode, NaiadError
from .inference import InferenceRequest, InferenceResponse
from .models.backend_registry import BackendRegistry
from .models.manager import ModelManager
from .models.poller import RepositoryPoller
from .models.records import LoadedVersion
from .observability.custom_metrics import CustomMetricRegistry
from .observability.log_settings import LogSettings
from .observability.metrics_settings import BUILTIN_METRIC_FAMILIES, MetricsSettings
from .observability.statistics import failure_reason
from .observability.status_report import VersionFigures, resident_bytes, status_report
from .observability.trace_settings import TraceSettings
from .observability.tracing import Tracing
from .python_models import AppReloader, DeclaredModels
from .repository.local import Repository
from .repository.remote import DEFAULT_TIMEOUT_SECS, open_repository
from .repository.uploaded_models import UploadedModels
from .request_validation import validate_request
from .safe_names import check_model_name
from .scheduling.job import Job
from .scheduling.rate_limiter import RateLimiter, ResourceLimit
from .scheduling.response_caching import enqueue_through_cache
from .shared_memory import SharedMemoryRegistry
from .version import __version__

__all__ = ["Server", "ServerOptions"]

log = logging.getLogger("naiad.server")


@dataclass
class ServerOptions:
    """What `naiad serve` flags configure; every field has Triton's default."""

    model_repositories: list[str] = field(default_factory=list)
    model_control_mode: str = "none"  # none | poll | explicit
    load_models: list[str] = field(default_factory=list)
    repository_poll_secs: float = 15.0
    # Seconds a remote repository's listing may take, and a download may go without data.
    repository_timeout_secs: float = DEFAULT_TIMEOUT_SECS
    strict_readiness: bool = True
    exit_on_error: bool = True
    auto_complete_config: bool = True
    exit_timeout_secs: float = 30.0
    model_load_thread_count: int = 4
    # Seconds one model's load may take before it fails; None waits forever.
    model_load_timeout_secs: float | None = None
    # Extra tries for a model whose load failed (tritonserver's --model-load-retry-count).
    model_load_retry_count: int = 0
    # Load `configs/<name>.pbtxt` instead of `config.pbtxt` where a model has one.
    model_config_name: str = ""
    # {"onnxruntime": {"key": "value"}}; the "" entry holds settings for every backend.
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    # Extra pluggy plugins (objects with @hookimpl functions), for embedding applications.
    backend_plugins: list[object] = field(default_factory=list)
    load_backend_entry_points: bool = True
    # tritonserver's default: clients written for Triton read it from the server metadata.
    server_id: str = "triton"
    # --allow-client-shm: clients may register system (and CUDA) shared-memory regions.
    allow_client_shm: bool = False
    # Observability: what --metrics-*, --log-* and --trace-config set.
    metrics_settings: MetricsSettings = field(default_factory=MetricsSettings)
    log_settings: LogSettings | None = None
    trace_settings: TraceSettings | None = None
    # --cache-config / --response-cache-byte-size: the response cache models may enable.
    cache: CacheSpec | None = None
    # --rate-limit / --rate-limit-resource: "off" or "execution_count", and the resource counts.
    rate_limit: str = "off"
    rate_limit_resources: list[ResourceLimit] = field(default_factory=list)
    # Models declared in Python: functions and classes decorated with @naiad.model, served
    # beside the repositories' models (docs/python-models.md).
    python_models: list[object] = field(default_factory=list)
    # Python files declaring such models (`naiad serve app.py`), imported at start; with
    # `reload_app_files`, imported again whenever one changes, and their models reloaded.
    app_files: list[str] = field(default_factory=list)
    reload_app_files: bool = False


class Server:
    """Loads models from repositories and answers inference requests."""

    def __init__(self, options: ServerOptions | None = None) -> None:
        self.options = options or ServerOptions()
        if self.options.model_control_mode not in ("none", "poll", "explicit"):
            raise NaiadError.invalid(
                f"model control mode must be none, poll or explicit, got '{self.options.model_control_mode}'"
            )
        try:
            self.rate_limiter = RateLimiter(self.options.rate_limit, self.options.rate_limit_resources)
        except ValueError as exc:
            raise NaiadError.invalid(str(exc)) from None
        self.backends: BackendRegistry | None = None
        self.models: ModelManager | None = None
        self.shared_memory = SharedMemoryRegistry(self.options.allow_client_shm)
        self.uploads = UploadedModels()
        self.poller: RepositoryPoller | None = None
        self._draining = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._poll_task: asyncio.Task[None] | None = None
        self.declared_models: DeclaredModels | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self.metrics_settings = self.options.metrics_settings
        # The logging and trace extensions read and change these live.
        self.log_settings = self.options.log_settings or LogSettings()
        self.tracing = Tracing(self.options.trace_settings)
        # Metric families models define (Triton's custom metrics); the metrics frontend
        # exports them beside the server's own.
        self.custom_metrics = CustomMetricRegistry(reserved=BUILTIN_METRIC_FAMILIES)
        # Live from the moment it exists until it stops: `naiad serve` binds its ports before
        # start() loads the models, and a health probe must be answered then. Ready waits
        # for start() to have loaded them (Triton opens no port before that).
        self._live = True
        self._started = False
        # The models start() still has to load: a request for one is told it is loading.
        self._loading: set[str] = set()
        self._created = time.monotonic()
        # The loop the server runs on, kept: asking for the running loop costs a getpid()
        # system call per request on CPython 3.11 (it checks for a fork).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._startup_failures: list[str] = []
        self.response_cache: ResponseCache | None = None
        self._cache_tasks: set[asyncio.Task[None]] = set()
        self._extensions: list[str] = [
            "classification",
            "sequence",
            "model_repository",
            "model_repository(unload_dependents)",
            "schedule_policy",
            "model_configuration",
            "system_shared_memory",
            "cuda_shared_memory",
            "binary_tensor_data",
            "parameters",
            "statistics",
            "trace",
            "logging",
            "generate",
        ]

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Discover backends and load models as the control mode says."""
        self._loop = asyncio.get_running_loop()
        options = self.options
        if options.cache is not None:
            self.response_cache = await open_cache(options.cache)
        plugins = list(options.backend_plugins)
        repositories: list[Repository] = list(
            await asyncio.gather(
                *(
                    asyncio.to_thread(open_repository, location, None, options.repository_timeout_secs)
                    for location in options.model_repositories
                )
            )
        )
        if options.python_models or options.app_files:
            declared = DeclaredModels(options.python_models, options.app_files)
            await asyncio.to_thread(declared.load)
            self.declared_models = declared
            plugins.append(declared.backend)
            repositories.append(declared.repository)
        self.backends = BackendRegistry(options.backend_config, plugins, options.load_backend_entry_points)
        self.models = ModelManager(
            repositories,
            self.backends,
            self,
            options.auto_complete_config,
            options.model_load_timeout_secs,
            load_retry_count=options.model_load_retry_count,
            config_name=options.model_config_name,
            rate_limiter=self.rate_limiter,
            metrics_settings=self.metrics_settings,
            requests_in_flight=lambda: self._inflight,
        )
        if options.model_control_mode == "explicit":
            names = options.load_models
            if "*" in names:
                names = self._all_model_names()
        else:
            names = self._all_model_names()
            self._warn_empty_repositories()
        self._loading = set(names)
        try:
            await self._load_at_startup(names)
        finally:
            self._loading.clear()
        self._started = True
        if options.model_control_mode == "poll":
            self.poller = RepositoryPoller(self.models, options.repository_poll_secs)
            self._poll_task = asyncio.create_task(self.poller.run(), name="naiad-poller")
        if options.reload_app_files and self.declared_models is not None and self.declared_models.app_files:
            reloader = AppReloader(self.declared_models, self.models, load_new=options.model_control_mode != "explicit")
            self._reload_task = asyncio.create_task(reloader.run(), name="naiad-app-reload")

    def _all_model_names(self) -> list[str]:
        assert self.models is not None
        found, duplicates = self.models.sources()
        return sorted(set(found) | set(duplicates))

    def _warn_empty_repositories(self) -> None:
        """A repository without a model directory serves nothing yet reports ready: say so
        (an empty repository is the Helm chart's default, easy to deploy by mistake)."""
        for repository in self._models().repositories:
            try:
                empty = not repository.list_models()
            except NaiadError:
                continue  # the load reports a repository it cannot read
            if empty:
                log.warning(
                    "model repository '%s' holds no model directory: the server serves no model%s "
                    "(a model is a directory NAME holding config.pbtxt and a version directory 1/ with the model file)",
                    repository.location,
                    " until one is added (poll mode)" if self.options.model_control_mode == "poll" else "",
                )

    async def _load_at_startup(self, names: list[str]) -> None:
        parallel = asyncio.Semaphore(max(1, self.options.model_load_thread_count))

        async def load(name: str) -> None:
            async with parallel:
                try:
                    await self._models().load(name)
                except NaiadError as exc:
                    self._startup_failures.append(exc.message)
                finally:
                    self._loading.discard(name)

        # Ensembles load after the models their steps use (an ensemble validates against
        # its step models' loaded configs); everything else loads in parallel.
        models = self._models()
        try:
            sources, _ = models.sources()
        except NaiadError:
            sources = {}
        for wave in load_order(names, lambda name: models.peek_config(name, sources)):
            await asyncio.gather(*(load(name) for name in wave))

    @property
    def startup_failures(self) -> list[str]:
        """Why each model that failed to load at start-up failed."""
        return list(self._startup_failures)

    async def drain(self, timeout: float | None = None) -> bool:
        """Refuse new requests (UNAVAILABLE) and wait up to `timeout` seconds for the ones
        in flight to finish; True when none is left. Graceful shutdown calls this first."""
        self._draining = True
        if self._inflight == 0:
            return True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            log.warning("%d request(s) still in flight after %ss", self._inflight, timeout)
            return False
        return True

    async def stop(self) -> None:
        self._draining = True
        self._live = False
        for task in (self._poll_task, self._reload_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.models is not None:
            await self.models.unload_all(self.options.exit_timeout_secs)
        if self.backends is not None:
            self.backends.finalize()
        self.uploads.close()
        self.tracing.close()
        if self.response_cache is not None:
            await self.response_cache.close()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- health and metadata -------------------------------------------------------------

    def is_live(self) -> bool:
        return self._live

    def is_ready(self) -> bool:
        """Live, started (the models of start-up loaded, or failed to), and with strict
        readiness every model loaded at start-up is ready."""
        if not self._live or not self._started or self.models is None:
            return False
        if self.options.strict_readiness:
            if self._startup_failures:
                return False
            return all(v.is_ready() for v in self.models.ready_models())
        return True

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            return self._models().get(name, version).is_ready()
        except NaiadError:
            return False

    def metadata(self) -> dict[str, Any]:
        return {"name": self.options.server_id, "version": __version__, "extensions": list(self._extensions)}

    def model(self, name: str, version: str = "") -> LoadedVersion:
        """The loaded version serving `name`/`version`; NOT_FOUND or UNAVAILABLE otherwise."""
        try:
            return self._models().get(name, version)
        except NaiadError as exc:
            if name in self._loading and exc.code in (ErrorCode.NOT_FOUND, ErrorCode.UNAVAILABLE):
                raise NaiadError.unavailable(f"model '{name}' is loading") from None
            raise

    def check_trace_model(self, name: str) -> None:
        """Trace settings name a model the server serves; Triton refuses others as a bad
        request, in its own words (the space before the colon included)."""
        try:
            self.model(name)
        except NaiadError as exc:
            if exc.code is ErrorCode.NOT_FOUND:
                raise NaiadError.invalid(f"Request for unknown model : {name}") from None
            raise

    def model_config(self, name: str, version: str = "") -> ModelConfig:
        return self.model(name, version).config

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        return self._metadata_of(self.model(name, version), sorted(self._models().record(name).serving))

    @staticmethod
    def _metadata_of(loaded: Any, versions: list[int]) -> dict[str, Any]:
        """KServe's model metadata of `loaded` (a version with `name` and `config`)."""
        config = loaded.config
        batch = [-1] if config.max_batch_size > 0 else []
        return {
            "name": loaded.name,
            "versions": [str(v) for v in versions],
            "platform": config.platform or config.backend,
            "inputs": [{"name": s.name, "datatype": s.datatype, "shape": batch + list(s.dims)} for s in config.inputs],
            "outputs": [
                {"name": s.name, "datatype": s.datatype, "shape": batch + list(s.dims)} for s in config.outputs
            ],
        }

    def repository_index(self, ready_only: bool = False) -> list[dict[str, str]]:
        rows = self._models().index(ready_only)
        # A model start-up has yet to begin loading has no state of its own yet: it is loading.
        for row in rows:
            if "state" not in row and row["name"] in self._loading:
                row.update(state="LOADING", reason="")
        return rows

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        """Triton's `model_stats` list: one model's versions, or every loaded model."""
        models = self._models()
        if name:
            try:
                # get() first: models.record() would create a record (and an index row) for
                # a name nobody loaded.
                loaded = models.get(name, version)
            except NaiadError as exc:
                # Triton answers the statistics of a model it does not serve as a bad request.
                if exc.code is ErrorCode.INVALID_ARG:
                    raise
                if exc.code is not ErrorCode.NOT_FOUND:  # known but not ready: say why
                    raise NaiadError.invalid(f"requested model '{name}' is not available: {exc.message}") from None
                if version and models.known(name) is not None:
                    raise NaiadError.invalid(f"requested model version is not available for model '{name}'") from None
                raise NaiadError.invalid(f"requested model '{name}' is not available") from None
            if version:
                return [loaded.statistics.to_dict()]
            record = models.record(name)
            return [record.serving[v].statistics.to_dict() for v in sorted(record.serving)]
        return [v.statistics.to_dict() for v in sorted(models.ready_models(), key=lambda v: (v.name, v.version))]

    @property
    def process_count(self) -> int:
        """The processes serving as this server (`--workers`; 1 in process)."""
        return 1

    def status(self) -> dict[str, Any]:
        """The status page's JSON (`observability/status_report.py`): every model of the
        index with its figures, and the server's uptime, processes and memory."""
        models = self._models()
        serving = [VersionFigures(v.statistics, len(v.runners)) for v in models.ready_models()]
        server = {
            "name": self.options.server_id,
            "version": __version__,
            "uptime_s": round(time.monotonic() - self._created, 3),
            "workers": self.process_count,
            "model_control_mode": self.options.model_control_mode,
            "resident_bytes": resident_bytes(),
        }
        return status_report(models.index(), serving, server=server)

    # -- model management ----------------------------------------------------------------

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        """Load or reload a model. `config` overrides its config.pbtxt (Triton's JSON form);
        `files` (path relative to the model directory -> content, e.g. "1/model.onnx")
        loads it from those files instead of the repository, and then needs `config`.
        The repository API of the frontends allows this only in explicit model control
        mode (`check_repository_control`); an embedding application may always call it.
        A name that could not be one model directory (blank, `..`, a `/`) is refused first."""
        check_model_name(name)
        source = None
        if files:
            if config is None:
                raise NaiadError.invalid(f"failed to load '{name}': model files were sent without a config")
            source = self.uploads.write(name, files)
        else:
            await asyncio.to_thread(self._models().refresh_repositories)
        await self._models().load(name, config, source)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload `name`; with `unload_dependents` (Triton's unload parameter), an
        ensemble's step models go too unless another loaded ensemble still uses them."""
        models = self._models()
        if models.known(name) is None:
            return  # Triton answers success for a model it never loaded
        config = models.peek_config(name) if unload_dependents else None
        await models.unload(name)
        if config is not None and config.platform == "ensemble":
            await models.unload_unused_steps(config)

    def check_repository_control(self) -> None:
        """Refuse a load or unload through the repository API outside explicit model
        control mode, as Triton does (with none, models are fixed; with poll, the
        repository decides)."""
        mode = self.options.model_control_mode
        if mode != "explicit":
            raise NaiadError.unavailable(
                f"explicit model load / unload is not allowed in model control mode '{mode}'; start "
                "the server with --model-control-mode=explicit"
            )

    # -- inference -----------------------------------------------------------------------

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """Run one request; raises NaiadError for every failure (bad input, model error).

        A decoupled model must answer with exactly one response here; use `infer_stream`
        for zero or many.
        """
        loaded = self.model(request.model_name, request.model_version)
        plan = loaded.config.derived(RequestPlan.of)
        if plan.decoupled:
            responses = [r async for r in self.infer_stream(request) if r.outputs or r.error]
            if len(responses) != 1:
                raise NaiadError.unsupported(
                    f"model '{request.model_name}' is decoupled and sent {len(responses)} responses; "
                    "use the streaming API to receive them"
                )
            return responses[0]
        job, future = self._submit(loaded, request, self._loop or asyncio.get_running_loop())
        try:
            response = await future
        except asyncio.CancelledError:
            job.cancel()
            raise
        return self._finish(response, request, loaded, plan.ensemble)

    def start_infer(
        self,
        request: InferenceRequest,
        done: Callable[[InferenceResponse | NaiadError], None],
        partial_outputs: bool = False,
    ) -> Callable[[], None] | None:
        """`infer` without a coroutine, for a caller that answers from a callback (the model
        home answering its workers, an ensemble's steps: no task per request). `done` gets
        the response or the error; the result cancels the request. None when the model is
        decoupled: its responses are `infer_stream`'s. `partial_outputs` accepts a response
        without some of the requested outputs (an ensemble goes on without them)."""
        loaded = self.model(request.model_name, request.model_version)
        plan = loaded.config.derived(RequestPlan.of)
        if plan.decoupled:
            return None
        job, future = self._submit(loaded, request, self._loop or asyncio.get_running_loop())
        partial = partial_outputs or plan.ensemble

        def finished(future: asyncio.Future[InferenceResponse]) -> None:
            if future.cancelled():
                return
            try:
                answer: InferenceResponse | NaiadError = self._finish(future.result(), request, loaded, partial)
            except NaiadError as exc:
                answer = exc
            done(answer)

        future.add_done_callback(finished)
        return job.cancel

    @staticmethod
    def _finish(
        response: InferenceResponse, request: InferenceRequest, loaded: LoadedVersion, partial: bool
    ) -> InferenceResponse:
        """The answer the client gets: raises the response's error; else the outputs it
        asked for (all of them unless `partial`: an ensemble answers with those its steps
        produced, as Triton's does), classified where it asked."""
        if response.error is not None:
            raise response.error
        response = _select_outputs(response, request, strict=not partial)
        apply_classification(response, request, loaded.config)
        return response

    async def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Every response a request produces, in order; an execution error arrives as a
        response with `error` set. Bad input raises NaiadError before the first one."""
        loaded = self.model(request.model_name, request.model_version)
        queue: asyncio.Queue[InferenceResponse] = asyncio.Queue()
        job, _ = self._submit(loaded, request, self._loop or asyncio.get_running_loop(), queue)
        final = False
        try:
            while not final:
                response = await queue.get()
                final = response.final
                if response.error is None:
                    response = _select_outputs(response, request, strict=False)
                    apply_classification(response, request, loaded.config)
                yield response
        finally:
            if not final:
                # The consumer went away: let schedulers and models drop the work.
                job.cancel()

    def _submit(
        self,
        loaded: LoadedVersion,
        request: InferenceRequest,
        loop: asyncio.AbstractEventLoop,
        queue: asyncio.Queue[InferenceResponse] | None = None,
    ) -> tuple[Job, asyncio.Future[InferenceResponse]]:
        if self._draining:
            raise NaiadError.unavailable("server is shutting down")
        statistics = loaded.statistics
        # monotonic_ns, not loop.time(): uvloop's clock ticks in milliseconds, which would
        # record most requests as taking 0 ns.
        started = time.monotonic_ns()
        # A request refused by validation never reaches the model; like tritonserver
        # (checked against 2.51), it counts in neither the statistics nor the metrics.
        request.take_control_parameters()
        batch_size = validate_request(request, loaded.config, str(loaded.version))
        future: asyncio.Future[InferenceResponse] = loop.create_future()
        statistics.pending += 1
        self._inflight += 1
        self._idle.clear()
        trace = request.trace
        if trace is None and self.tracing.active:
            trace = self.tracing.begin(request, loaded.name, str(loaded.version))
        awaiting_first = statistics.first_response_histogram is not None

        def deliver(response: InferenceResponse) -> None:
            nonlocal awaiting_first
            if awaiting_first:
                awaiting_first = False
                statistics.record_first_response(time.monotonic_ns() - started)
            if response.final:
                if trace is not None:
                    trace.request_done(response)
                if not job.executed:
                    statistics.pending -= 1
                self._inflight -= 1
                if self._inflight == 0:
                    self._idle.set()
                elapsed = time.monotonic_ns() - started
                if response.error is None:
                    statistics.record_success(elapsed)
                else:
                    statistics.record_failure(elapsed, failure_reason(response.error, request.cancelled))
            if queue is not None:
                queue.put_nowait(response)
            elif not future.done():
                future.set_result(response)

        job = Job(request, batch_size, deliver)
        if self.response_cache is not None and loaded.config.derived(RequestPlan.of).response_cache:
            enqueue_through_cache(
                self.response_cache,
                statistics,
                job,
                loaded.name,
                str(loaded.version),
                loaded.scheduler.enqueue,
                self._cache_tasks,
            )
        else:
            loaded.scheduler.enqueue(job)
        return job, future

    def _models(self) -> ModelManager:
        if self.models is None:
            if self._loop is None:
                raise NaiadError.unavailable("server is not started")
            raise NaiadError.unavailable("server is starting: its model repositories are not open yet")
        return self.models


def _select_outputs(response: InferenceResponse, request: InferenceRequest, strict: bool = True) -> InferenceResponse:
    """Keep the outputs the client asked for, in the order it asked (all when it named none).
    `strict` requires every requested output (a streamed response may carry a subset)."""
    if request.outputs:
        by_name = {t.name: t for t in response.outputs}
        missing = [o.name for o in request.outputs if o.name not in by_name]
        if missing and strict:
            raise NaiadError.internal(f"model '{request.model_name}' did not produce requested output(s) {missing}")
        response.outputs = [by_name[o.name] for o in request.outputs if o.name in by_name]
    return response
