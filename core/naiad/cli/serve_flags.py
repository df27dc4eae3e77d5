"""`naiad serve`'s own flags (the frontends bring theirs): tritonserver's names, each declared
once as an `option` field of the class for its group of --help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..observability.log_settings import LOG_FORMATS
from ..observability.metrics_settings import MetricsSettings
from ..option_fields import option
from ..scheduling.rate_limiter import ResourceLimit, parse_rate_limit, parse_rate_limit_resource
from ..workers import PIN_CHOICES

__all__ = [
    "SERVE_FLAG_GROUPS",
    "SERVE_FLAG_GROUPS_AFTER_FRONTENDS",
    "CacheFlags",
    "LoggingFlags",
    "MeasuredMetricsFlags",
    "RateLimiterFlags",
    "RepositoryFlags",
    "ServerFlags",
    "TracingFlags",
    "backend_setting",
    "config_name",
    "plugin_reference",
]


def backend_setting(text: str) -> tuple[str, str, str]:
    """`backend,key=value` or `key=value` (a setting for every backend)."""
    backend, _, setting = text.rpartition(",")
    key, sep, value = setting.partition("=")
    if not sep or not key:
        raise ValueError(f"expected BACKEND,KEY=VALUE or KEY=VALUE, got '{text}'")
    return backend, key, value


def config_name(text: str) -> str:
    # It names a file inside each model's configs/ directory: one plain name, nothing more
    # ("" is the default: config.pbtxt).
    if any(c.isspace() for c in text) or "/" in text or "\\" in text or text in (".", ".."):
        raise ValueError(f"expected a name without spaces or path separators, got '{text}'")
    return text


def plugin_reference(text: str) -> str:
    module, sep, attribute = text.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"expected MODULE:OBJECT, got '{text}'")
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class RepositoryFlags:
    model_repository: tuple[str, ...] = option(
        (),
        "--model-repository",
        "a model repository directory (or s3://, gs://, as:// URL); repeat for several; required "
        "unless an app file declares the models",
        aliases=("--model-store",),
        metavar="PATH",
    )
    reload: bool = option(
        False,
        "--reload",
        "import the app file again whenever it changes and reload the models it declares",
        switch=True,
        shown="",
    )
    model_control_mode: str = option(
        "none",
        "--model-control-mode",
        "none: load every model at start; poll: also follow repository changes; "
        "explicit: load only --load-model names and what the repository API asks for",
        choices=("none", "poll", "explicit"),
        shown="",
    )
    repository_poll_secs: float = option(
        15.0, "--repository-poll-secs", "seconds between repository scans in poll mode", metavar="SECONDS"
    )
    repository_timeout_secs: float = option(
        300.0,
        "--repository-timeout-secs",
        "seconds a remote repository's listing may take, and a download may go without data",
        metavar="SECONDS",
    )
    load_model: tuple[str, ...] = option(
        (), "--load-model", "in explicit mode, a model to load at start; '*' loads all; repeatable", metavar="NAME"
    )
    disable_auto_complete_config: bool = option(
        False,
        "--disable-auto-complete-config",
        "do not let backends fill in inputs, outputs and max_batch_size from model files",
        switch=True,
        shown="",
    )
    strict_model_config: bool | None = option(
        None, "--strict-model-config", "tritonserver's older spelling: true is --disable-auto-complete-config"
    )
    model_load_thread_count: int = option(4, "--model-load-thread-count", "models loaded in parallel", metavar="N")
    model_load_retry_count: int = option(
        0,
        "--model-load-retry-count",
        "times a model whose load failed is loaded again before it counts as failed",
        metavar="N",
    )
    model_config_name: str = option(
        "",
        "--model-config-name",
        "load each model's configs/NAME.pbtxt where it has one, else its config.pbtxt",
        metavar="NAME",
        parse=config_name,
    )
    model_load_timeout_secs: float = option(
        0.0,
        "--model-load-timeout-secs",
        "a model whose load takes longer fails to load; 0 waits forever",
        metavar="SECONDS",
    )
    backend_config: tuple[tuple[str, str, str], ...] = option(
        (),
        "--backend-config",
        "a setting passed to a backend; repeatable",
        metavar="BACKEND,KEY=VALUE",
        parse=backend_setting,
    )
    backend_plugin: tuple[str, ...] = option(
        (),
        "--backend-plugin",
        "a pluggy plugin providing backends that is not installed as a 'naiad.backends' "
        "entry point (a class is instantiated); repeatable",
        metavar="MODULE:OBJECT",
        parse=plugin_reference,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFlags:
    strict_readiness: bool = option(True, "--strict-readiness", "ready only when every model is ready")
    exit_on_error: bool = option(True, "--exit-on-error", "exit when a model fails to load at start-up")
    exit_timeout_secs: float = option(
        30.0,
        "--exit-timeout-secs",
        "on SIGTERM, how long in-flight requests may take to finish",
        metavar="SECONDS",
    )
    workers: int | None = option(
        None,
        "--workers",
        "worker processes sharing the HTTP and gRPC ports (SO_REUSEPORT): front doors, and "
        "one model home where every model lives once (docs/performance.md); default: one per "
        "usable CPU, or per CPU of time a cgroup CPU limit allows when that is fewer; one "
        "process with two usable CPUs or fewer, with port 0, or on a taken port",
        metavar="N",
    )
    pin_loop_threads: str = option(
        "auto",
        "--pin-loop-threads",
        "with several workers, run each worker's event-loop thread on a CPU of its own "
        "(worker i on the i-th usable CPU, once it serves); every other thread and the model "
        "processes keep every CPU. auto pins when there is one worker per usable CPU, the "
        "default --workers above two CPUs",
        choices=PIN_CHOICES,
    )
    raise_malloc_thresholds: bool = option(
        True,
        "--raise-malloc-thresholds",
        "on glibc, serve blocks of up to 32 MiB from the heap and keep up to 64 MiB free before "
        "handing memory back, in every process of the server (the ceilings glibc's adaptive "
        "thresholds reach on their own), so a framework's tensors (PyTorch's) are not mapped "
        "afresh for every batch; left alone where MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, "
        "MALLOC_TOP_PAD_, MALLOC_MMAP_MAX_ or GLIBC_TUNABLES' glibc.malloc settings are set",
    )
    busy_poll_us: int = option(
        300,
        "--busy-poll-us",
        "microseconds the event loop polls instead of sleeping while a batch it awaits (a "
        "model process's) that usually takes less than that runs, and after its answers are "
        "sent, so the model's result and the client's next request find it awake (a wake-up "
        "across CPUs costs tens of microseconds on a virtual machine); batches that take "
        "longer get no polling; 0 turns it off",
        metavar="US",
    )
    server_id: str = option(
        "triton",
        "--id",
        "the server name /v2 reports",
        dest="server_id",
        shown="triton, tritonserver's: clients written for Triton check it",
    )
    allow_client_shm: bool = option(
        False,
        "--allow-client-shm",
        "let clients register system (and CUDA) shared-memory regions for inputs and outputs; "
        "off by default, as in tritonserver",
    )


# What the metrics show is the server's MetricsSettings, whose defaults these flags take.
_MEASURED: Final = MetricsSettings()


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredMetricsFlags:
    """What the metrics measure (where they are served is the metrics frontend's)."""

    allow_cpu_metrics: bool = option(
        _MEASURED.allow_cpu_metrics, "--allow-cpu-metrics", "export CPU utilization and memory gauges"
    )
    allow_gpu_metrics: bool = option(
        _MEASURED.allow_gpu_metrics, "--allow-gpu-metrics", "export GPU gauges through NVML when a GPU is present"
    )
    metrics_interval_ms: float = option(
        _MEASURED.interval_ms, "--metrics-interval-ms", "milliseconds between CPU/GPU gauge samples", metavar="MS"
    )
    metrics_config: tuple[str, ...] = option(
        (),
        "--metrics-config",
        "counter_latencies, summary_latencies, summary_quantiles, histogram_latencies; repeatable",
        metavar="KEY=VALUE",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggingFlags:
    log_verbose: int = option(0, "--log-verbose", "verbose logging level; 0 is off", metavar="LEVEL")
    log_info: bool = option(True, "--log-info", "log info messages")
    log_warning: bool = option(True, "--log-warning", "log warnings")
    log_error: bool = option(True, "--log-error", "log errors")
    log_format: str = option(
        "default",
        "--log-format",
        "line layout: default (tritonserver's) or ISO8601 timestamps",
        choices=LOG_FORMATS,
        shown="",
    )
    log_file: str = option("", "--log-file", "write the log to PATH instead of stderr", metavar="PATH")


@dataclass(frozen=True, slots=True, kw_only=True)
class TracingFlags:
    trace_config: tuple[str, ...] = option(
        (),
        "--trace-config",
        "trace setting: level, rate, count, log_frequency, file, mode (triton|opentelemetry), "
        "opentelemetry,url=...; repeatable",
        metavar="[MODE,]KEY=VALUE",
        item_spellings=(
            ("--trace-file", "triton,file"),
            ("--trace-level", "level"),
            ("--trace-rate", "rate"),
            ("--trace-count", "count"),
            ("--trace-log-frequency", "triton,log_frequency"),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheFlags:
    cache_config: tuple[str, ...] = option(
        (),
        "--cache-config",
        "the response cache models with response_cache { enable: true } use: "
        "local,size=BYTES or redis,host=H / redis,port=P (and Triton's other redis "
        "settings); repeatable",
        metavar="NAME,KEY=VALUE",
    )
    response_cache_byte_size: int | None = option(
        None, "--response-cache-byte-size", "deprecated spelling of --cache-config local,size=BYTES", metavar="BYTES"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimiterFlags:
    rate_limit: str = option(
        "off",
        "--rate-limit",
        "execution_count: instances run only when the resources their rate_limiter lists are "
        "free, the least-executed (times priority) first; off (default): the rate_limiter "
        "config is ignored",
        metavar="MODE",
        parse=parse_rate_limit,
        shown="",
    )
    rate_limit_resource: tuple[ResourceLimit, ...] = option(
        (),
        "--rate-limit-resource",
        "how many of a resource there are (on DEVICE, or on every device); without it, the "
        "most any instance asks for; repeatable",
        metavar="NAME:COUNT[:DEVICE]",
        parse=parse_rate_limit_resource,
    )


# --help's groups around the frontends' own: (title, class), the first two before them.
SERVE_FLAG_GROUPS: Final[tuple[tuple[str, type[Any]], ...]] = (
    ("model repository", RepositoryFlags),
    ("server", ServerFlags),
)
SERVE_FLAG_GROUPS_AFTER_FRONTENDS: Final[tuple[tuple[str, type[Any]], ...]] = (
    ("metrics", MeasuredMetricsFlags),
    ("logging", LoggingFlags),
    ("tracing", TracingFlags),
    ("response cache", CacheFlags),
    ("rate limiter", RateLimiterFlags),
)
