"""The settings of naiad's three frontends, typed and frozen: the one place their defaults live.

Each field carries tritonserver's flag name and a one-line help text in its metadata, so
`naiad serve` builds its HTTP, gRPC and metrics flags from these classes (`naiad.cli.flags`) and
an application embedding a frontend constructs the same objects directly. Values are checked
where they are used, so a bad one fails as its frontend starts, naming the flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..option_fields import option

__all__ = [
    "COMPRESSION_LEVELS",
    "MAX_INPUT_SIZE",
    "GrpcOptions",
    "HttpOptions",
    "MetricsOptions",
    "option",
]

# Largest HTTP request body accepted; tritonserver's --http-max-input-size default.
MAX_INPUT_SIZE: Final = 64 * 1024 * 1024

# tritonserver's --grpc-infer-response-compression-level names, as zlib levels; the algorithm
# (gzip, else deflate) is one the client accepts.
COMPRESSION_LEVELS: Final = {"none": 0, "low": 1, "medium": 6, "high": 9}


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpOptions:
    """`naiad serve`'s HTTP/REST flags; every default is tritonserver's unless the help says."""

    enabled: bool = option(True, "--allow-http", "serve HTTP")
    port: int = option(8000, "--http-port", "HTTP port")
    address: str = option("0.0.0.0", "--http-address", "HTTP address")
    reuse_port: bool = option(False, "--reuse-http-port", "let several servers listen on the HTTP port (SO_REUSEPORT)")
    server: str = option(
        "naiad",
        "--http-server",
        "HTTP server: naiad's own HTTP/1.1 server (fastest), uvicorn, or hypercorn (HTTP/2)",
        choices=("naiad", "uvicorn", "hypercorn"),
    )
    header_forward_pattern: str | None = option(
        None,
        "--http-header-forward-pattern",
        "request headers whose names match become inference request parameters",
        metavar="REGEX",
    )
    max_input_size: int = option(
        MAX_INPUT_SIZE, "--http-max-input-size", "largest request body accepted", metavar="BYTES", shown="64 MiB"
    )
    restricted_apis: tuple[str, ...] = option(
        (),
        "--http-restricted-api",
        "answer the comma-separated API groups (health, metadata, inference, shared-memory, model-config, "
        "model-repository, statistics, trace, logging) only for requests with the header KEY: VALUE (others get "
        "403); repeatable",
        metavar="APIS:KEY=VALUE",
    )
    # As nginx's client_header_timeout bounds a half-sent head.
    header_read_timeout_s: float = option(
        30.0,
        "--http-header-read-timeout",
        "time a client has to send a request's line and headers; then 408 and close",
        metavar="SECONDS",
    )
    # Load tools and tritonclient pools reuse connections: longer than uvicorn's 5 s.
    keepalive_timeout_s: float = option(
        75.0, "--http-keepalive-timeout", "time an idle keep-alive connection stays open", metavar="SECONDS"
    )
    # nginx's client_body_timeout (60 s, the longest pause) with Apache mod_reqtimeout's
    # MinRate (a slow body is refused, however steady): docs/http.md says why these values.
    body_read_timeout_s: float = option(
        60.0,
        "--http-body-read-timeout",
        "longest pause in a request body, and the time before --http-body-min-rate applies; then 408 and close",
        metavar="SECONDS",
    )
    body_min_rate: int = option(
        64 * 1024,
        "--http-body-min-rate",
        "slowest average rate a request body may arrive at once --http-body-read-timeout has passed; 0: no minimum",
        metavar="BYTES_PER_S",
        shown="65536, 64 KiB/s",
    )
    # nginx's send_timeout.
    write_timeout_s: float = option(
        60.0,
        "--http-write-timeout",
        "time a client may leave its answer unread (the server's send buffer full) before the connection is dropped",
        metavar="SECONDS",
    )
    max_buffered_bytes: int = option(
        1 << 30,
        "--http-max-buffered-bytes",
        "request bytes all connections of one process may hold together; past it, connections wait before reading more",
        metavar="BYTES",
        shown="1 GiB",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcOptions:
    """`naiad serve`'s gRPC flags, in tritonserver's names and units (milliseconds for the
    keepalive settings), so a Triton command line carries over."""

    enabled: bool = option(True, "--allow-grpc", "serve gRPC")
    port: int = option(8001, "--grpc-port", "gRPC port")
    address: str = option("0.0.0.0", "--grpc-address", "gRPC address")
    reuse_port: bool = option(False, "--reuse-grpc-port", "let several servers listen on the gRPC port (SO_REUSEPORT)")
    max_message_size: int = option(
        2**31 - 1,
        "--grpc-max-message-size",
        "largest gRPC message received or sent",
        metavar="BYTES",
        shown="2147483647, Triton's limit",
    )
    compression_level: str = option(
        "none",
        "--grpc-infer-response-compression-level",
        "compression of responses (gzip/deflate, as the client accepts); compressed requests are always accepted",
        choices=tuple(COMPRESSION_LEVELS),
    )
    keepalive_time_ms: int = option(
        7_200_000, "--grpc-keepalive-time", "milliseconds between keepalive pings", metavar="MS"
    )
    keepalive_timeout_ms: int = option(
        20_000, "--grpc-keepalive-timeout", "milliseconds to wait for a keepalive ping's acknowledgement", metavar="MS"
    )
    keepalive_permit_without_calls: bool = option(
        False, "--grpc-keepalive-permit-without-calls", "allow keepalive pings when no call is in flight"
    )
    http2_max_pings_without_data: int = option(
        2,
        "--grpc-http2-max-pings-without-data",
        "pings sent without data before gRPC stops sending them; 0: no limit",
        metavar="N",
    )
    http2_min_recv_ping_interval_without_data_ms: int = option(
        300_000,
        "--grpc-http2-min-recv-ping-interval-without-data",
        "shortest interval between a client's pings without data",
        metavar="MS",
    )
    http2_max_ping_strikes: int = option(
        2, "--grpc-http2-max-ping-strikes", "bad pings tolerated before the connection is closed; 0: any", metavar="N"
    )
    max_connection_age_ms: int | None = option(
        None, "--grpc-max-connection-age", "milliseconds a connection may live", metavar="MS", shown="unlimited"
    )
    max_concurrent_streams: int = option(
        1000,
        "--grpc-max-concurrent-streams",
        "streams (calls) open at once on one connection; more are refused",
        metavar="N",
    )
    max_stream_resets: int = option(
        200,
        "--grpc-max-stream-resets",
        "calls a client may cancel (or break) on one connection in 30 s; one more closes it; 0: no limit",
        metavar="N",
    )
    handshake_timeout_ms: int = option(
        10_000,
        "--grpc-handshake-timeout",
        "time a new connection has to send the HTTP/2 preface and SETTINGS",
        metavar="MS",
    )
    max_connection_idle_ms: int | None = option(
        300_000,
        "--grpc-max-connection-idle",
        "time a connection with no call open stays open; then GOAWAY",
        metavar="MS",
    )
    max_connection_age_grace_ms: int | None = option(
        None,
        "--grpc-max-connection-age-grace",
        "grace period after the maximum connection age",
        metavar="MS",
        shown="unlimited",
    )
    header_forward_pattern: str | None = option(
        None,
        "--grpc-header-forward-pattern",
        "request headers whose names match become inference request parameters",
        metavar="REGEX",
    )
    restricted_protocols: tuple[str, ...] = option(
        (),
        "--grpc-restricted-protocol",
        "answer the comma-separated protocol groups (health, metadata, inference, shared-memory, model-config, "
        "model-repository, statistics, trace, logging) only for calls with the header "
        "triton-grpc-protocol-KEY: VALUE; repeatable",
        metavar="PROTOCOLS:KEY=VALUE",
    )
    use_ssl: bool = option(
        False, "--grpc-use-ssl", "serve gRPC over TLS (needs --grpc-server-cert and --grpc-server-key)"
    )
    use_ssl_mutual: bool = option(
        False, "--grpc-use-ssl-mutual", "TLS with client certificates checked against --grpc-root-cert"
    )
    server_cert: str | None = option(None, "--grpc-server-cert", "server certificate file", metavar="PEM")
    server_key: str | None = option(None, "--grpc-server-key", "server private key file", metavar="PEM")
    root_cert: str | None = option(None, "--grpc-root-cert", "root certificate file", metavar="PEM")


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsOptions:
    """Where `naiad serve` serves Prometheus metrics. What is measured (--metrics-config,
    the CPU/GPU gauges and their interval) is the server's `MetricsSettings`."""

    enabled: bool = option(True, "--allow-metrics", "serve Prometheus metrics")
    port: int = option(8002, "--metrics-port", "metrics port")
    # None: the HTTP address, as in tritonserver.
    address: str | None = option(None, "--metrics-address", "metrics address", shown="--http-address")
