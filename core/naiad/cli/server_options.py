"""`naiad serve`'s flags -> the `ServerOptions` of the in-process server."""

from __future__ import annotations

import argparse
import importlib

from ..cache.response_cache import cache_spec_from_flags
from ..observability.log_settings import LogSettings
from ..observability.metrics_settings import MetricsSettings
from ..observability.trace_config import trace_settings_from_config
from ..server import ServerOptions
from .flags import options_from_flags
from .serve_flags import (
    CacheFlags,
    LoggingFlags,
    MeasuredMetricsFlags,
    RateLimiterFlags,
    RepositoryFlags,
    ServerFlags,
    TracingFlags,
)

__all__ = ["load_plugin", "options_from_args"]


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


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    """The server's options; a bad setting raises NaiadError naming its flag."""
    repository = options_from_flags(RepositoryFlags, args)
    server = options_from_flags(ServerFlags, args)
    measured = options_from_flags(MeasuredMetricsFlags, args)
    logging_flags = options_from_flags(LoggingFlags, args)
    cache = options_from_flags(CacheFlags, args)
    limiter = options_from_flags(RateLimiterFlags, args)
    backend_config: dict[str, dict[str, str]] = {}
    for backend, key, value in repository.backend_config:
        backend_config.setdefault(backend, {})[key] = value
    auto_complete = not repository.disable_auto_complete_config
    if repository.strict_model_config is not None:
        auto_complete = auto_complete and not repository.strict_model_config
    return ServerOptions(
        model_repositories=list(repository.model_repository),
        model_control_mode=repository.model_control_mode,
        load_models=list(repository.load_model),
        repository_poll_secs=repository.repository_poll_secs,
        repository_timeout_secs=repository.repository_timeout_secs,
        strict_readiness=server.strict_readiness,
        exit_on_error=server.exit_on_error,
        auto_complete_config=auto_complete,
        exit_timeout_secs=server.exit_timeout_secs,
        model_load_thread_count=repository.model_load_thread_count,
        model_load_timeout_secs=repository.model_load_timeout_secs or None,
        model_load_retry_count=repository.model_load_retry_count,
        model_config_name=repository.model_config_name,
        backend_config=backend_config,
        backend_plugins=[load_plugin(reference) for reference in repository.backend_plugin],
        server_id=server.server_id,
        allow_client_shm=server.allow_client_shm,
        metrics_settings=MetricsSettings.from_config(
            list(measured.metrics_config),
            interval_ms=measured.metrics_interval_ms,
            allow_cpu_metrics=measured.allow_cpu_metrics,
            allow_gpu_metrics=measured.allow_gpu_metrics,
        ),
        log_settings=LogSettings(
            log_file=logging_flags.log_file,
            log_info=logging_flags.log_info,
            log_warning=logging_flags.log_warning,
            log_error=logging_flags.log_error,
            log_verbose_level=logging_flags.log_verbose,
            log_format=logging_flags.log_format,
        ),
        trace_settings=trace_settings_from_config(options_from_flags(TracingFlags, args).trace_config),
        cache=cache_spec_from_flags(list(cache.cache_config), cache.response_cache_byte_size),
        rate_limit=limiter.rate_limit,
        rate_limit_resources=list(limiter.rate_limit_resource),
        app_files=[args.app] if getattr(args, "app", None) else [],
        reload_app_files=repository.reload,
    )
