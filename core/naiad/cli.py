"""`naiad serve` and friends: tritonserver's flags, on the in-process `Server`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import importlib
import logging
import os
import signal
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import naiad_wire
from naiad_wire.balance import ConnectionBalancer
from naiad_wire.balance import install as install_balancer
from naiad_wire.balance import retire as retire_balancer

from .cache.response_cache import cache_spec_from_flags
from .cpu_affinity import release_process
from .errors import NaiadError
from .flag_values import parse_bool as _bool
from .frontends.options import GrpcOptions, HttpOptions, MetricsOptions
from .inert_flags import add_inert_flags, warn_inert_flags
from .observability.log_settings import LOG_FORMATS, LogSettings
from .observability.metrics_settings import MetricsSettings
from .observability.tracing import otlp_tracer_provider, trace_settings_from_config
from .scheduling.rate_limiter import ResourceLimit, parse_rate_limit, parse_rate_limit_resource
from .server import Server, ServerOptions
from .startup_report import backend_table, model_table, options_table
from .version import __version__
from .workers import (
    PIN_CHOICES,
    WORKER_INDEX_ENV,
    FrontDoor,
    ModelHome,
    Topology,
    WorkerPool,
    is_worker,
    loop_cpu,
    pin_event_loop,
    signal_worker_ready,
    wait_orphaned,
    worker_0,
    worker_count,
)
from .workers.linux_process import HOME_NAME, end_with_parent, name_process, worker_name

__all__ = [
    "READY_LINE",
    "add_option_flags",
    "build_parser",
    "frontend_options",
    "load_plugin",
    "main",
    "options_from_args",
]

# Logged once every frontend listens; scripts and naiad.testing.ServerProcess wait for it.
READY_LINE = "naiad is ready"

log = logging.getLogger("naiad")

# Frontend modules `naiad serve` starts, each with the flag that enables it. A frontend
# module provides `async def run(server, options, started: asyncio.Event)` that serves until
# cancelled; `options` is its options object (the OpenAI integration still takes the flags).
FRONTENDS = (
    ("http", "allow_http", "naiad.frontends.http"),
    ("grpc", "allow_grpc", "naiad.frontends.grpc"),
    ("metrics", "allow_metrics", "naiad.frontends.metrics"),
    ("openai", "allow_openai", "naiad_openai"),
)

Options = TypeVar("Options", HttpOptions, GrpcOptions, MetricsOptions)


def _backend_setting(text: str) -> tuple[str, str, str]:
    """`backend,key=value` or `key=value` (a setting for every backend)."""
    backend, _, setting = text.rpartition(",")
    key, sep, value = setting.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected BACKEND,KEY=VALUE or KEY=VALUE, got '{text}'")
    return backend, key, value


def _config_name(text: str) -> str:
    # It names a file inside each model's configs/ directory: one plain name, nothing more
    # ("" is the default: config.pbtxt).
    if any(c.isspace() for c in text) or "/" in text or "\\" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"expected a name without spaces or path separators, got '{text}'")
    return text


def _plugin_reference(text: str) -> str:
    module, sep, attribute = text.partition(":")
    if not sep or not module or not attribute:
        raise argparse.ArgumentTypeError(f"expected MODULE:OBJECT, got '{text}'")
    return text


def load_plugin(reference: str) -> object:
    """`MODULE:OBJECT` for --backend-plugin -> the object (an instance when it is a class)."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"--backend-plugin: expected MODULE:OBJECT, got '{reference}'")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"--backend-plugin {reference}: cannot import '{module_name}': {exc}") from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise SystemExit(f"--backend-plugin {reference}: module '{module_name}' has no '{attribute}'") from None
    return target() if isinstance(target, type) else target


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="naiad", description="naiad: an inference server that speaks Triton's interfaces."
    )
    parser.add_argument("--version", action="version", version=f"naiad {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve the models of one or more model repositories",
        description="Serve the models of one or more model repositories over HTTP/REST and gRPC.",
    )
    add_serve_arguments(serve)
    return parser


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    repo = p.add_argument_group("model repository")
    repo.add_argument(
        "--model-repository",
        "--model-store",
        dest="model_repository",
        action="append",
        required=True,
        metavar="PATH",
        help="a model repository directory (or s3://, gs://, as:// URL); repeat for several",
    )
    repo.add_argument(
        "--model-control-mode",
        choices=("none", "poll", "explicit"),
        default="none",
        help="none: load every model at start; poll: also follow repository changes; "
        "explicit: load only --load-model names and what the repository API asks for",
    )
    repo.add_argument(
        "--repository-poll-secs",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="seconds between repository scans in poll mode (default 15)",
    )
    repo.add_argument(
        "--repository-timeout-secs",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds a remote repository's listing may take, and a download may go without data (default 300)",
    )
    repo.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="in explicit mode, a model to load at start; '*' loads all; repeatable",
    )
    repo.add_argument(
        "--disable-auto-complete-config",
        action="store_true",
        help="do not let backends fill in inputs, outputs and max_batch_size from model files",
    )
    repo.add_argument(
        "--strict-model-config",
        type=_bool,
        default=None,
        metavar="BOOL",
        help="tritonserver's older spelling: true is --disable-auto-complete-config",
    )
    repo.add_argument(
        "--model-load-thread-count", type=int, default=4, metavar="N", help="models loaded in parallel (default 4)"
    )
    repo.add_argument(
        "--model-load-retry-count",
        type=int,
        default=0,
        metavar="N",
        help="times a model whose load failed is loaded again before it counts as failed (default 0)",
    )
    repo.add_argument(
        "--model-config-name",
        type=_config_name,
        default="",
        metavar="NAME",
        help="load each model's configs/NAME.pbtxt where it has one, else its config.pbtxt",
    )
    repo.add_argument(
        "--model-load-timeout-secs",
        type=float,
        default=0,
        metavar="SECONDS",
        help="a model whose load takes longer fails to load; 0 waits forever (default 0)",
    )
    repo.add_argument(
        "--backend-config",
        action="append",
        default=[],
        type=_backend_setting,
        metavar="BACKEND,KEY=VALUE",
        help="a setting passed to a backend; repeatable",
    )
    repo.add_argument(
        "--backend-plugin",
        action="append",
        default=[],
        type=_plugin_reference,
        metavar="MODULE:OBJECT",
        help="a pluggy plugin providing backends that is not installed as a 'naiad.backends' "
        "entry point (a class is instantiated); repeatable",
    )

    life = p.add_argument_group("server")
    life.add_argument(
        "--strict-readiness",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="ready only when every model is ready (default true)",
    )
    life.add_argument(
        "--exit-on-error",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="exit when a model fails to load at start-up (default true)",
    )
    life.add_argument(
        "--exit-timeout-secs",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight requests may take to finish (default 30)",
    )
    life.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes sharing the HTTP and gRPC ports (SO_REUSEPORT): front doors, and "
        "one model home where every model lives once (docs/performance.md); default: one per "
        "usable CPU, or per CPU of time a cgroup CPU limit allows when that is fewer; one "
        "process with two usable CPUs or fewer, with port 0, or on a taken port",
    )
    life.add_argument(
        "--pin-loop-threads",
        choices=PIN_CHOICES,
        default="auto",
        help="with several workers, run each worker's event-loop thread on a CPU of its own "
        "(worker i on the i-th usable CPU, once it serves); every other thread and the model "
        "processes keep every CPU. auto pins when there is one worker per usable CPU, the "
        "default --workers above two CPUs (default auto)",
    )
    life.add_argument(
        "--id",
        dest="server_id",
        default="triton",
        help="the server name /v2 reports (default triton, tritonserver's: clients written for Triton check it)",
    )
    life.add_argument(
        "--allow-client-shm",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="let clients register system (and CUDA) shared-memory regions for inputs and outputs; "
        "off by default, as in tritonserver (default false)",
    )

    add_option_flags(p.add_argument_group("HTTP/REST"), HttpOptions)
    add_option_flags(p.add_argument_group("gRPC"), GrpcOptions)
    metrics = p.add_argument_group("metrics")
    add_option_flags(metrics, MetricsOptions)
    # What the metrics show is the server's MetricsSettings, whose defaults these flags take.
    measured = MetricsSettings()
    metrics.add_argument(
        "--allow-cpu-metrics",
        type=_bool,
        default=measured.allow_cpu_metrics,
        metavar="BOOL",
        help=_help("export CPU utilization and memory gauges", measured.allow_cpu_metrics),
    )
    metrics.add_argument(
        "--allow-gpu-metrics",
        type=_bool,
        default=measured.allow_gpu_metrics,
        metavar="BOOL",
        help=_help("export GPU gauges through NVML when a GPU is present", measured.allow_gpu_metrics),
    )
    metrics.add_argument(
        "--metrics-interval-ms",
        type=float,
        default=measured.interval_ms,
        metavar="MS",
        help=_help("milliseconds between CPU/GPU gauge samples", measured.interval_ms),
    )
    metrics.add_argument(
        "--metrics-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="counter_latencies, summary_latencies, summary_quantiles, histogram_latencies; repeatable",
    )

    openai = p.add_argument_group("OpenAI-compatible API (the naiad-openai package)")
    openai.add_argument(
        "--allow-openai",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="serve /v1/models, /v1/completions, /v1/chat/completions (default false)",
    )
    openai.add_argument("--openai-port", type=int, default=9000, help="OpenAI API port (default 9000)")
    openai.add_argument("--openai-address", default=None, help="OpenAI API address (default: the HTTP address)")

    logs = p.add_argument_group("logging")
    logs.add_argument(
        "--log-verbose", type=int, default=0, metavar="LEVEL", help="verbose logging level; 0 is off (default 0)"
    )
    logs.add_argument("--log-info", type=_bool, default=True, metavar="BOOL", help="log info messages (default true)")
    logs.add_argument("--log-warning", type=_bool, default=True, metavar="BOOL", help="log warnings (default true)")
    logs.add_argument("--log-error", type=_bool, default=True, metavar="BOOL", help="log errors (default true)")
    logs.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="default",
        help="line layout: default (tritonserver's) or ISO8601 timestamps",
    )
    logs.add_argument("--log-file", default="", metavar="PATH", help="write the log to PATH instead of stderr")

    trace = p.add_argument_group("tracing")
    trace.add_argument(
        "--trace-config",
        action="append",
        default=[],
        metavar="[MODE,]KEY=VALUE",
        help="trace setting: level, rate, count, log_frequency, file, mode (triton|opentelemetry), "
        "opentelemetry,url=...; repeatable",
    )
    for flag, key in (
        ("--trace-file", "triton,file"),
        ("--trace-level", "level"),
        ("--trace-rate", "rate"),
        ("--trace-count", "count"),
        ("--trace-log-frequency", "triton,log_frequency"),
    ):
        trace.add_argument(
            flag,
            dest="trace_config",
            action=_TraceConfigAlias,
            setting=key,
            metavar="VALUE",
            help=f"deprecated spelling of --trace-config {key}=VALUE",
        )

    cache = p.add_argument_group("response cache")
    cache.add_argument(
        "--cache-config",
        action="append",
        default=[],
        metavar="NAME,KEY=VALUE",
        help="the response cache models with response_cache { enable: true } use: "
        "local,size=BYTES or redis,host=H / redis,port=P (and Triton's other redis "
        "settings); repeatable",
    )
    cache.add_argument(
        "--response-cache-byte-size",
        type=int,
        default=None,
        metavar="BYTES",
        help="deprecated spelling of --cache-config local,size=BYTES",
    )

    limiter = p.add_argument_group("rate limiter")
    limiter.add_argument(
        "--rate-limit",
        type=_rate_limit_mode,
        default="off",
        metavar="MODE",
        help="execution_count: instances run only when the resources their rate_limiter lists are "
        "free, the least-executed (times priority) first; off (default): the rate_limiter "
        "config is ignored",
    )
    limiter.add_argument(
        "--rate-limit-resource",
        type=_rate_limit_resource,
        action="append",
        default=[],
        metavar="NAME:COUNT[:DEVICE]",
        help="how many of a resource there are (on DEVICE, or on every device); without it, the "
        "most any instance asks for; repeatable",
    )

    add_inert_flags(p)


class _TraceConfigAlias(argparse.Action):
    """tritonserver's deprecated --trace-* flags: each appends its --trace-config item."""

    def __init__(self, option_strings: list[str], dest: str, setting: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, **kwargs)  # type: ignore[arg-type]
        self.setting = setting

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        getattr(namespace, self.dest).append(f"{self.setting}={values}")


def _rate_limit_mode(text: str) -> str:
    try:
        return parse_rate_limit(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _rate_limit_resource(text: str) -> ResourceLimit:
    try:
        return parse_rate_limit_resource(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_option_flags(group: argparse._ArgumentGroup, cls: type[Options]) -> None:
    """One flag per field of a frontend's options class, with the field's default and help."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        meta = field.metadata
        kind = _flag_type(hints[field.name])
        kwargs: dict[str, Any] = {"default": field.default, "help": _help(meta["help"], field.default, meta["shown"])}
        if kind is tuple:
            kwargs.update(action="append", default=[])
        elif kind is bool:
            kwargs.update(type=_bool, metavar="BOOL")
        elif kind is not str:
            kwargs["type"] = kind
        if meta["metavar"]:
            kwargs["metavar"] = meta["metavar"]
        if meta["choices"]:
            kwargs["choices"] = meta["choices"]
        group.add_argument(meta["flag"], **kwargs)


def _flag_type(hint: object) -> type:
    """The value type of a field's annotation (`int | None` -> int, `tuple[str, ...]` -> tuple)."""
    if isinstance(hint, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    origin = typing.get_origin(hint)
    result = origin if origin is not None else hint
    assert isinstance(result, type)
    return result


def _help(text: str, default: object, shown: str | None = None) -> str:
    """`text (default D)`: D is `shown`, else the default as a flag spells it (none when None or empty)."""
    if shown is None:
        if default is None or default == ():
            return text
        shown = (
            str(default).lower()
            if isinstance(default, bool)
            else f"{default:g}"
            if isinstance(default, float)
            else str(default)
        )
    return f"{text} (default {shown})"


def frontend_options(cls: type[Options], args: argparse.Namespace) -> Options:
    """A frontend's options from `naiad serve`'s flags (those add_option_flags made)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        value = getattr(args, field.metadata["flag"].removeprefix("--").replace("-", "_"))
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def _frontend_arguments(args: argparse.Namespace) -> dict[str, object]:
    """What each frontend module's `run` takes, by module name."""
    http = frontend_options(HttpOptions, args)
    metrics = frontend_options(MetricsOptions, args)
    if metrics.address is None:
        metrics = dataclasses.replace(metrics, address=http.address)
    return {
        "naiad.frontends.http": http,
        "naiad.frontends.grpc": frontend_options(GrpcOptions, args),
        "naiad.frontends.metrics": metrics,
        "naiad_openai": args,
    }


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    backend_config: dict[str, dict[str, str]] = {}
    for backend, key, value in args.backend_config:
        backend_config.setdefault(backend, {})[key] = value
    auto_complete = not args.disable_auto_complete_config
    if args.strict_model_config is not None:
        auto_complete = auto_complete and not args.strict_model_config
    metrics_settings = MetricsSettings.from_config(
        args.metrics_config,
        interval_ms=args.metrics_interval_ms,
        allow_cpu_metrics=args.allow_cpu_metrics,
        allow_gpu_metrics=args.allow_gpu_metrics,
    )
    log_settings = LogSettings(
        log_file=args.log_file,
        log_info=args.log_info,
        log_warning=args.log_warning,
        log_error=args.log_error,
        log_verbose_level=args.log_verbose,
        log_format=args.log_format,
    )
    trace_settings, _ = trace_settings_from_config(args.trace_config)
    return ServerOptions(
        model_repositories=list(args.model_repository),
        model_control_mode=args.model_control_mode,
        load_models=list(args.load_model),
        repository_poll_secs=args.repository_poll_secs,
        repository_timeout_secs=args.repository_timeout_secs,
        strict_readiness=args.strict_readiness,
        exit_on_error=args.exit_on_error,
        auto_complete_config=auto_complete,
        exit_timeout_secs=args.exit_timeout_secs,
        model_load_thread_count=args.model_load_thread_count,
        model_load_timeout_secs=args.model_load_timeout_secs or None,
        model_load_retry_count=args.model_load_retry_count,
        model_config_name=args.model_config_name,
        backend_config=backend_config,
        backend_plugins=[load_plugin(reference) for reference in args.backend_plugin],
        server_id=args.server_id,
        allow_client_shm=args.allow_client_shm,
        metrics_settings=metrics_settings,
        log_settings=log_settings,
        trace_settings=trace_settings,
        cache=cache_spec_from_flags(args.cache_config, args.response_cache_byte_size),
        rate_limit=args.rate_limit,
        rate_limit_resources=list(args.rate_limit_resource),
    )


def configure_logging(verbose: int) -> None:
    """Plain tritonserver-style logging at a verbose level (for tools outside `serve`)."""
    LogSettings(log_verbose_level=max(0, verbose)).install()


async def serve(
    args: argparse.Namespace,
    options: ServerOptions | None = None,
    pool: WorkerPool | None = None,
    topology: Topology | None = None,
) -> int:
    """Serve as this process's part says: one process with its models; worker 0 (with the
    `pool` it started, and its `topology`); another worker or the model home (their
    topology comes from the environment worker 0 gave them)."""
    if topology is None:
        topology = Topology.from_environment()
    if topology is not None:
        name_process(HOME_NAME if topology.home else worker_name(topology.index))
    if topology is not None and topology.restarted:
        # Started again by worker 0's pinned loop thread, this process inherited its CPU.
        release_process(topology.cpus)
    # The workers share their ports: they also even out the connections the kernel gives them.
    balancer = ConnectionBalancer(topology.directory, topology.index, topology.count) if topology else None
    if balancer is not None:
        balancer.start()
        install_balancer(balancer)
    try:
        return await _serve(args, options or options_from_args(args), pool, topology)
    finally:
        if balancer is not None:
            install_balancer(None)
            balancer.close()
        if pool is not None:
            await pool.stop(args.exit_timeout_secs)
            assert topology is not None
            topology.remove()


def _compiled_modules() -> str:
    """How many of the request path's modules run compiled (a build with a C compiler
    compiles them with mypyc; without one they are pure Python, about a tenth slower)."""
    core = naiad_wire.compiled_modules(Path(__file__).parent)
    wire = naiad_wire.compiled_modules()
    if not core and not wire:
        return "0 (pure Python, slower)"
    return f"{len(core)} naiad, {len(wire)} naiad_wire"


async def _start_models(args: argparse.Namespace, server: Server, extra: list[tuple[str, str]]) -> bool:
    """Start a server that holds the models (one process, or the model home), print its
    start-up tables; False when it must not serve (the reason is logged)."""
    _, otel = trace_settings_from_config(args.trace_config)
    if otel.get("url"):
        server.tracing.tracer_provider = otlp_tracer_provider(otel)
    try:
        await server.start()
    except NaiadError as exc:
        # A start-up failure (a repository that is not there, ...) is one line, as in tritonserver.
        log.error("error: creating server: %s", exc.message)
        await server.stop()
        return False
    extra.append(("compiled_modules", _compiled_modules()))
    for table in (backend_table(server), model_table(server), options_table(server, extra)):
        print(table, file=sys.stderr, flush=True)
    if server.startup_failures and args.exit_on_error:
        log.error("exiting: %d model(s) failed to load (--exit-on-error=true)", len(server.startup_failures))
        await server.stop()
        return False
    return True


async def _start_frontends(
    args: argparse.Namespace, server: Server, names: tuple[str, ...], stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """Start the frontends among `names` that their flags enable, one after the other; one
    that fails to start is logged and sets `stop` (its task is then done)."""
    tasks: list[asyncio.Task[None]] = []
    frontend_arguments = _frontend_arguments(args)
    for name, flag, module_name in FRONTENDS:
        if name not in names or not getattr(args, flag):
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            log.warning("%s frontend unavailable: %s", name, exc)
            continue
        started = asyncio.Event()
        running = module.run(server, frontend_arguments[module_name], started)
        tasks.append(asyncio.create_task(running, name=f"naiad-{name}"))
        waiter = asyncio.create_task(started.wait())
        done, _ = await asyncio.wait([waiter, tasks[-1]], return_when=asyncio.FIRST_COMPLETED)
        if tasks[-1] in done:
            waiter.cancel()
            log.error("%s frontend failed to start: %s", name, tasks[-1].exception())
            stop.set()
            break
    return tasks


def _stop_on_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _shut_down(server: Server, tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
    """The frontends first: they stop listening, answer what their open connections ask
    (each connection's last answer says it closes, an HTTP/2 connection sends GOAWAY) and
    close, within `timeout_s`. A request arriving on an open connection meanwhile is served,
    not refused; what is still in flight after them (a model's BLS call) gets the rest."""
    log.info("shutting down: finishing in-flight requests (up to %ss)", timeout_s)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    retire_balancer()  # the other workers pass this one no more connections
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await server.drain(max(0.0, deadline - loop.time()))
    await server.stop()


async def _serve(
    args: argparse.Namespace, options: ServerOptions, pool: WorkerPool | None, topology: Topology | None
) -> int:
    """One server process with its models, or a worker of several: the model home, or a
    front door."""
    pin_cpu = loop_cpu(getattr(args, "pin_loop_threads", "off"), topology)
    if topology is None or topology.home:
        server = Server(options) if topology is None else ModelHome(options, topology)
        if not await _start_models(args, server, _worker_rows(args, topology)):
            return 1
    else:
        if pool is not None:
            try:
                await pool.wait_home()
            except RuntimeError as exc:
                log.error("error: the model home did not start: %s", exc)
                return 1
        server = FrontDoor(options, topology)
        await server.start()
    loop = asyncio.get_running_loop()
    stop = _stop_on_signals(loop)
    # The model home serves the metrics of a server with several workers.
    names = ("http", "grpc", "openai") if isinstance(server, FrontDoor) else ("http", "grpc", "metrics", "openai")
    tasks = await _start_frontends(args, server, names, stop)
    failed = [t for t in tasks if t.done()]
    watchers = [asyncio.create_task(stop.wait())]
    if is_worker():
        watchers.append(asyncio.create_task(wait_orphaned()))
    if not failed and pool is not None:
        pool_ready = asyncio.create_task(pool.wait_ready())
        await asyncio.wait([pool_ready, watchers[0]], return_when=asyncio.FIRST_COMPLETED)
        if not pool_ready.done():
            pool_ready.cancel()
        elif pool_ready.exception() is not None:
            log.error("%s", pool_ready.exception())
            failed = [pool_ready]
        watchers.append(asyncio.create_task(pool.supervise()))
    if not failed and not stop.is_set():
        if pin_cpu is not None and topology is not None:
            _pin_loop_thread(loop, pin_cpu, topology)
        frontends = ", ".join(t.get_name().removeprefix("naiad-") for t in tasks) or "no frontends"
        if signal_worker_ready():
            log.info("worker %s serves: %s", os.environ.get(WORKER_INDEX_ENV, "?"), frontends)
        else:
            workers = f" ({args.workers} worker processes)" if pool is not None else ""
            log.info("%s: %s%s", READY_LINE, frontends, workers)
        done, _ = await asyncio.wait([*watchers, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if pool is not None and watchers[1] in done:
            log.error("supervising the worker processes failed (%r); stopping the server", watchers[1].exception())
            failed = [watchers[1]]
        elif is_worker() and (watchers[1] in done or os.getppid() != worker_0()):
            # The watcher noticed, or the kernel's SIGTERM on worker 0's exit came first.
            log.error("worker 0 is gone; this worker stops too")
    for watcher in watchers:
        watcher.cancel()
    if pool is not None:
        pool.stop_front_doors()  # they drain beside this one; the model home stops after all
    await _shut_down(server, tasks, args.exit_timeout_secs)
    return 1 if failed else 0


def _worker_rows(args: argparse.Namespace, topology: Topology | None) -> list[tuple[str, str]]:
    """The start-up table's rows about the workers, printed by the model home."""
    if topology is None:
        return []
    # Worker 0's pinning: each worker pins its own loop once it serves.
    pin_cpu = loop_cpu(getattr(args, "pin_loop_threads", "off"), dataclasses.replace(topology, index=0))
    cpus = ", ".join(map(str, topology.cpus))
    return [
        ("workers", f"{topology.count} (worker {topology.home_index} holds the models)"),
        ("pin_loop_threads", "no" if pin_cpu is None else f"one CPU per worker, over CPUs {cpus}"),
    ]


def _pin_loop_thread(loop: asyncio.AbstractEventLoop, cpu: int, topology: Topology) -> None:
    """Pins this worker's loop thread once it serves: the models are loaded by then, so the
    threads and processes they started kept every CPU."""
    try:
        pin_event_loop(loop, cpu, topology.cpus)
    except OSError as exc:
        log.warning(
            "--pin-loop-threads: worker %d's event loop could not be pinned to CPU %d: %s", topology.index, cpu, exc
        )


def main(argv: Sequence[str] | None = None) -> int:
    if is_worker():
        # Never outlive worker 0, in whatever state this process is when it goes.
        end_with_parent(worker_0())
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].startswith("--") and argv[0] not in ("--help", "--version"):
        # A tritonserver launch line with `naiad` for `tritonserver`: flags alone mean serve.
        argv.insert(0, "serve")
    args = parser.parse_args(argv)
    if args.command != "serve":
        parser.print_help()
        return 2
    try:
        options = options_from_args(args)
    except NaiadError as exc:
        parser.error(exc.message)
    shared_ports = [
        (address, port)
        for allowed, address, port in (
            (args.allow_http, args.http_address, args.http_port),
            (args.allow_grpc, args.grpc_address, args.grpc_port),
        )
        if allowed
    ]
    try:
        args.workers = worker_count(args.workers, shared_ports)
    except ValueError as exc:
        parser.error(str(exc))
    if args.workers > 1:
        args.reuse_http_port = args.reuse_grpc_port = True
    assert options.log_settings is not None
    options.log_settings.install()
    if not is_worker():  # worker 0 speaks for the server at start-up
        warn_inert_flags(args, log)
    try:
        import uvloop  # type: ignore[import-not-found]

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    pool = topology = None
    if args.workers > 1:
        # The model home loads the models while the workers start; all of them forked from
        # here, before any thread or event loop, with what they run imported already.
        for _, _, module_name in FRONTENDS:
            with contextlib.suppress(ImportError):
                importlib.import_module(module_name)
        gc.freeze()  # the collector leaves the inherited objects (and their pages) alone
        topology = Topology.create(args.workers)
        pool = WorkerPool(argv, topology)
        pool.start(main)
    return runner(serve(args, options, pool, topology))


if __name__ == "__main__":
    sys.exit(main())
