"""The frontend options classes are the one home of the HTTP, gRPC and metrics settings:
`naiad serve` has exactly one flag per field, with the field's default, and hands the
frontends those objects."""

from __future__ import annotations

import dataclasses

import pytest

from naiad.cli import build_parser, frontend_options
from naiad.frontends.options import GrpcOptions, HttpOptions, MetricsOptions


def _group(title):
    serve = next(a for a in build_parser()._actions if a.dest == "command").choices["serve"]
    return next(g for g in serve._action_groups if g.title == title)


@pytest.mark.parametrize("cls, title", [(HttpOptions, "HTTP/REST"), (GrpcOptions, "gRPC"), (MetricsOptions, "metrics")])
def test_flags_and_defaults_are_the_fields(cls, title):
    by_flag = {action.option_strings[0]: action for action in _group(title)._group_actions}
    fields = dataclasses.fields(cls)
    for field in fields:
        action = by_flag[field.metadata["flag"]]
        default = list(field.default) if isinstance(field.default, tuple) else field.default
        assert action.default == default, field.name
        assert action.help.startswith(field.metadata["help"]), field.name
        assert "\n" not in field.metadata["help"]
    # The metrics group also holds the server's metrics settings (--metrics-config ...).
    flags = {field.metadata["flag"] for field in fields}
    extra = set(by_flag) - flags
    assert extra == (
        set()
        if cls is not MetricsOptions
        else {"--allow-cpu-metrics", "--allow-gpu-metrics", "--metrics-interval-ms", "--metrics-config"}
    )


@pytest.mark.parametrize("cls", [HttpOptions, GrpcOptions, MetricsOptions])
def test_parsed_defaults_equal_the_class_defaults(cls):
    args = build_parser().parse_args(["serve", "--model-repository", "r"])
    assert frontend_options(cls, args) == cls()


def test_flags_reach_the_options():
    args = build_parser().parse_args(
        [
            "serve",
            "--model-repository",
            "r",
            "--http-port",
            "9100",
            "--http-restricted-api",
            "health:k=v",
            "--http-restricted-api",
            "statistics:k=w",
            "--reuse-http-port",
            "true",
            "--http-keepalive-timeout",
            "5",
            "--grpc-max-connection-age",
            "1000",
            "--grpc-infer-response-compression-level",
            "high",
            "--metrics-port",
            "9102",
        ]
    )
    http = frontend_options(HttpOptions, args)
    assert (http.port, http.reuse_port, http.keepalive_timeout_s) == (9100, True, 5.0)
    assert http.restricted_apis == ("health:k=v", "statistics:k=w")
    grpc = frontend_options(GrpcOptions, args)
    assert (grpc.max_connection_age_ms, grpc.compression_level) == (1000, "high")
    assert frontend_options(MetricsOptions, args).port == 9102


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HttpOptions().port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "flags, address",
    [
        (["--http-address", "127.0.0.2"], "127.0.0.2"),
        (["--http-address", "127.0.0.2", "--metrics-address", "127.0.0.3"], "127.0.0.3"),
    ],
)
def test_metrics_listen_on_the_http_address_unless_told(flags, address):
    from naiad.cli.frontend_plugins import frontend_options as all_frontend_options
    from naiad.cli.frontend_plugins import installed_frontends

    args = build_parser().parse_args(["serve", "--model-repository", "r", *flags])
    assert all_frontend_options(installed_frontends(), args)["metrics"].address == address
