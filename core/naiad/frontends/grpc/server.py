"""Builds and runs naiad's gRPC server (`http2` + `rpc`) from its `GrpcOptions`."""

from __future__ import annotations

import asyncio
import logging
import ssl

from naiad_wire.balance import balanced
from naiad_wire.connections import stop_serving
from naiad_wire.http2 import Http2Limits
from naiad_wire.http2_protocol import Http2Connection
from naiad_wire.listen import listen

from ...server import Server
from ..kserve.header_pattern import compile_header_pattern
from ..options import COMPRESSION_LEVELS, GrpcOptions
from .health import HealthServicer, health_methods
from .reflection import ReflectionServicer, reflection_methods
from .restrictions import restricted_methods
from .rpc import RpcDispatcher, RpcSettings
from .service import InferenceServicer, rpc_methods

__all__ = ["GrpcServer", "run"]

log = logging.getLogger("naiad.grpc")


def rpc_settings(options: GrpcOptions) -> RpcSettings:
    if options.compression_level not in COMPRESSION_LEVELS:
        raise ValueError(
            f"--grpc-infer-response-compression-level must be one of {', '.join(COMPRESSION_LEVELS)}, "
            f"got '{options.compression_level}'"
        )
    return RpcSettings(
        max_receive_size=options.max_message_size,
        max_send_size=options.max_message_size,
        compression_level=COMPRESSION_LEVELS[options.compression_level],
    )


def http2_limits(options: GrpcOptions) -> Http2Limits:
    def seconds(ms: int | None) -> float | None:
        return None if ms is None else ms / 1000.0

    if options.max_concurrent_streams < 1:
        raise ValueError(f"--grpc-max-concurrent-streams must be at least 1, got {options.max_concurrent_streams}")
    if options.max_stream_resets < 0:
        raise ValueError(f"--grpc-max-stream-resets must not be negative, got {options.max_stream_resets}")
    for flag, value in (
        ("--grpc-handshake-timeout", options.handshake_timeout_ms),
        ("--grpc-max-connection-idle", options.max_connection_idle_ms),
    ):
        if value is not None and value < 0:
            raise ValueError(f"{flag} must not be negative, got {value}")

    return Http2Limits(
        keepalive_time_s=seconds(options.keepalive_time_ms),
        keepalive_timeout_s=options.keepalive_timeout_ms / 1000.0,
        keepalive_permit_without_calls=options.keepalive_permit_without_calls,
        max_pings_without_data=options.http2_max_pings_without_data,
        min_recv_ping_interval_without_data_s=options.http2_min_recv_ping_interval_without_data_ms / 1000.0,
        max_ping_strikes=options.http2_max_ping_strikes,
        max_connection_age_s=seconds(options.max_connection_age_ms),
        max_connection_age_grace_s=seconds(options.max_connection_age_grace_ms),
        max_concurrent_streams=options.max_concurrent_streams,
        max_resets=options.max_stream_resets,
        handshake_timeout_s=seconds(options.handshake_timeout_ms),
        idle_timeout_s=seconds(options.max_connection_idle_ms),
    )


def ssl_context(options: GrpcOptions) -> ssl.SSLContext | None:
    if not (options.use_ssl or options.use_ssl_mutual):
        return None
    if not options.server_cert or not options.server_key:
        raise ValueError("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key")
    if options.use_ssl_mutual and not options.root_cert:
        raise ValueError("--grpc-use-ssl-mutual needs --grpc-root-cert")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(options.server_cert, options.server_key)
    context.set_alpn_protocols(["h2"])  # gRPC clients insist on negotiating HTTP/2
    if options.root_cert:
        context.load_verify_locations(options.root_cert)
    if options.use_ssl_mutual:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class GrpcServer:
    """`inference.GRPCInferenceService`, `grpc.health.v1.Health` and server reflection on one
    listening socket."""

    def __init__(self, server: Server, options: GrpcOptions) -> None:
        self.options = options
        pattern = options.header_forward_pattern
        forward = compile_header_pattern(pattern, "--grpc-header-forward-pattern") if pattern else None
        restrictions = restricted_methods(options.restricted_protocols)
        methods = rpc_methods(InferenceServicer(server, forward), restrictions)
        methods.update(health_methods(HealthServicer(server), restrictions))
        served = {path.split("/")[1] for path in methods}
        methods.update(reflection_methods(ReflectionServicer(served)))
        self.dispatcher = RpcDispatcher(methods, rpc_settings(options))
        self.limits = http2_limits(options)
        self.ssl = ssl_context(options)
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
        connection = lambda: Http2Connection(self.dispatcher, self.limits, self.connections)  # noqa: E731
        self._listener = await loop.create_server(
            # A TLS connection has begun its handshake before it can be passed on.
            connection if self.ssl is not None else balanced(b"g", connection),
            sock=sock,
            ssl=self.ssl,
            backlog=1024,
        )
        return self._listener.sockets[0].getsockname()[1]

    async def stop(self, grace_s: float) -> None:
        """Stop listening, let open calls finish for up to `grace_s`, then close the rest."""
        await stop_serving(self._listener, self.connections, grace_s)
        for call in list(self.dispatcher.calls):
            call.stream_reset()


async def run(server: Server, options: GrpcOptions, started: asyncio.Event) -> None:
    """Serve gRPC until cancelled; `started` is set once the port listens."""
    grpc_server = GrpcServer(server, options)
    port = await grpc_server.start()
    log.info("Started GRPCInferenceService at %s:%d", options.address, port)
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        # In-flight calls get the exit timeout to finish, as HTTP requests do.
        await grpc_server.stop(server.options.exit_timeout_secs)
