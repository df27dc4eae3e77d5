"""Builds and runs naiad's gRPC server (`http2` + `rpc`) from `naiad serve`'s gRPC flags.

The flags keep tritonserver's names and units (milliseconds for the keepalive settings),
so a Triton command line carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import ssl
from dataclasses import dataclass, field

from naiad_wire.connections import stop_serving
from naiad_wire.http2 import Http2Limits
from naiad_wire.http2_protocol import Http2Connection
from naiad_wire.listen import listen

from ...server import Server
from .health import HealthServicer, health_methods
from .reflection import ReflectionServicer, reflection_methods
from .restrictions import restricted_methods
from .rpc import RpcDispatcher, RpcSettings
from .service import InferenceServicer, rpc_methods

__all__ = ["GrpcOptions", "COMPRESSION_LEVELS", "GrpcServer", "run"]

log = logging.getLogger("naiad.grpc")

# tritonserver's --grpc-infer-response-compression-level names, as zlib levels; the algorithm
# (gzip, else deflate) is one the client accepts.
COMPRESSION_LEVELS = {"none": 0, "low": 1, "medium": 6, "high": 9}

# Triton's gRPC message size limit (INT32_MAX).
MAX_MESSAGE_SIZE = 2**31 - 1


@dataclass
class GrpcOptions:
    """Every field has tritonserver's default."""

    address: str = "0.0.0.0"
    port: int = 8001
    reuse_port: bool = False
    max_message_size: int = MAX_MESSAGE_SIZE
    compression_level: str = "none"
    keepalive_time_ms: int = 7_200_000
    keepalive_timeout_ms: int = 20_000
    keepalive_permit_without_calls: bool = False
    http2_max_pings_without_data: int = 2
    http2_min_recv_ping_interval_without_data_ms: int = 300_000
    http2_max_ping_strikes: int = 2
    max_connection_age_ms: int | None = None
    max_connection_age_grace_ms: int | None = None
    max_concurrent_streams: int = 1000
    handshake_timeout_ms: int = 10_000
    max_connection_idle_ms: int | None = 300_000
    header_forward_pattern: str | None = None
    restricted_protocols: list[str] = field(default_factory=list)
    use_ssl: bool = False
    use_ssl_mutual: bool = False
    server_cert: str | None = None
    server_key: str | None = None
    root_cert: str | None = None
    shutdown_grace_s: float = 30.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "GrpcOptions":
        """Read `naiad serve` flags (argparse has typed them); a flag the parser lacks keeps
        its default, so an embedding application may pass a partial namespace."""
        values = {field: getattr(args, flag) for flag, field in _FLAG_FIELDS.items() if hasattr(args, flag)}
        if values.get("restricted_protocols") is None:
            values.pop("restricted_protocols", None)
        return cls(**values)

    def rpc_settings(self) -> RpcSettings:
        if self.compression_level not in COMPRESSION_LEVELS:
            raise ValueError(
                f"--grpc-infer-response-compression-level must be one of {', '.join(COMPRESSION_LEVELS)}, "
                f"got '{self.compression_level}'"
            )
        return RpcSettings(
            max_receive_size=self.max_message_size,
            max_send_size=self.max_message_size,
            compression_level=COMPRESSION_LEVELS[self.compression_level],
        )

    def limits(self) -> Http2Limits:
        def seconds(ms: int | None) -> float | None:
            return None if ms is None else ms / 1000.0

        if self.max_concurrent_streams < 1:
            raise ValueError(f"--grpc-max-concurrent-streams must be at least 1, got {self.max_concurrent_streams}")
        for flag, value in (("--grpc-handshake-timeout", self.handshake_timeout_ms),
                            ("--grpc-max-connection-idle", self.max_connection_idle_ms)):
            if value is not None and value < 0:
                raise ValueError(f"{flag} must not be negative, got {value}")

        return Http2Limits(
            keepalive_time_s=seconds(self.keepalive_time_ms),
            keepalive_timeout_s=self.keepalive_timeout_ms / 1000.0,
            keepalive_permit_without_calls=self.keepalive_permit_without_calls,
            max_pings_without_data=self.http2_max_pings_without_data,
            min_recv_ping_interval_without_data_s=self.http2_min_recv_ping_interval_without_data_ms / 1000.0,
            max_ping_strikes=self.http2_max_ping_strikes,
            max_connection_age_s=seconds(self.max_connection_age_ms),
            max_connection_age_grace_s=seconds(self.max_connection_age_grace_ms),
            max_concurrent_streams=self.max_concurrent_streams,
            handshake_timeout_s=seconds(self.handshake_timeout_ms),
            idle_timeout_s=seconds(self.max_connection_idle_ms),
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        if not (self.use_ssl or self.use_ssl_mutual):
            return None
        if not self.server_cert or not self.server_key:
            raise ValueError("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key")
        if self.use_ssl_mutual and not self.root_cert:
            raise ValueError("--grpc-use-ssl-mutual needs --grpc-root-cert")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        context.set_alpn_protocols(["h2"])  # gRPC clients insist on negotiating HTTP/2
        if self.root_cert:
            context.load_verify_locations(self.root_cert)
        if self.use_ssl_mutual:
            context.verify_mode = ssl.CERT_REQUIRED
        return context


# `naiad serve` flag (argparse dest) -> GrpcOptions field.
_FLAG_FIELDS = {
    "grpc_address": "address",
    "grpc_port": "port",
    "reuse_grpc_port": "reuse_port",
    "grpc_max_message_size": "max_message_size",
    "grpc_infer_response_compression_level": "compression_level",
    "grpc_keepalive_time": "keepalive_time_ms",
    "grpc_keepalive_timeout": "keepalive_timeout_ms",
    "grpc_keepalive_permit_without_calls": "keepalive_permit_without_calls",
    "grpc_http2_max_pings_without_data": "http2_max_pings_without_data",
    "grpc_http2_min_recv_ping_interval_without_data": "http2_min_recv_ping_interval_without_data_ms",
    "grpc_http2_max_ping_strikes": "http2_max_ping_strikes",
    "grpc_max_connection_age": "max_connection_age_ms",
    "grpc_max_connection_age_grace": "max_connection_age_grace_ms",
    "grpc_max_concurrent_streams": "max_concurrent_streams",
    "grpc_handshake_timeout": "handshake_timeout_ms",
    "grpc_max_connection_idle": "max_connection_idle_ms",
    "grpc_header_forward_pattern": "header_forward_pattern",
    "grpc_restricted_protocol": "restricted_protocols",
    "grpc_use_ssl": "use_ssl",
    "grpc_use_ssl_mutual": "use_ssl_mutual",
    "grpc_server_cert": "server_cert",
    "grpc_server_key": "server_key",
    "grpc_root_cert": "root_cert",
    "exit_timeout_secs": "shutdown_grace_s",
}


class GrpcServer:
    """`inference.GRPCInferenceService`, `grpc.health.v1.Health` and server reflection on one
    listening socket."""

    def __init__(self, server: Server, options: GrpcOptions) -> None:
        self.options = options
        forward = re.compile(options.header_forward_pattern) if options.header_forward_pattern else None
        restrictions = restricted_methods(options.restricted_protocols)
        methods = rpc_methods(InferenceServicer(server, forward), restrictions)
        methods.update(health_methods(HealthServicer(server), restrictions))
        served = {path.split("/")[1] for path in methods}
        methods.update(reflection_methods(ReflectionServicer(served)))
        self.dispatcher = RpcDispatcher(methods, options.rpc_settings())
        self.limits = options.limits()
        self.ssl = options.ssl_context()
        self.connections: set[Http2Connection] = set()
        self._listener: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        """Listen; returns the bound port. Raises RuntimeError when it cannot be bound."""
        options = self.options
        loop = asyncio.get_running_loop()
        try:
            sock = listen(options.address, options.port, reuse_port=options.reuse_port, backlog=1024, name="gRPC")
        except OSError as exc:
            raise RuntimeError(f"gRPC: unable to listen on {options.address}:{options.port}: {exc}") from None
        self._listener = await loop.create_server(
            lambda: Http2Connection(self.dispatcher, self.limits, self.connections), sock=sock, ssl=self.ssl,
            backlog=1024,
        )
        return self._listener.sockets[0].getsockname()[1]

    async def stop(self, grace_s: float) -> None:
        """Stop listening, let open calls finish for up to `grace_s`, then close the rest."""
        await stop_serving(self._listener, self.connections, grace_s)
        for call in list(self.dispatcher.calls):
            call.stream_reset()


async def run(server: Server, args: argparse.Namespace, started: asyncio.Event) -> None:
    """Serve gRPC until cancelled; `started` is set once the port listens."""
    options = GrpcOptions.from_args(args)
    grpc_server = GrpcServer(server, options)
    port = await grpc_server.start()
    log.info("Started GRPCInferenceService at %s:%d", options.address, port)
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        # In-flight calls get the exit timeout to finish, as HTTP requests do.
        await grpc_server.stop(options.shutdown_grace_s)
