"""Builds and runs the grpcio asyncio server from `naiad serve`'s gRPC flags.

The flags keep tritonserver's names and units (milliseconds for the keepalive settings),
so a Triton command line carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ...server import Server
from .health import HEALTH_SERVICE_NAME, HealthServicer, health_handlers
from .restrictions import parse_restrictions
from .service import SERVICE_NAME, InferenceServicer, method_handlers

__all__ = ["GrpcOptions", "COMPRESSION_LEVELS", "build_grpc_server", "run"]

log = logging.getLogger("naiad.grpc")

# tritonserver's --grpc-infer-response-compression-level names, as gRPC compression levels:
# gRPC picks the algorithm (gzip or deflate) among those the client accepts.
COMPRESSION_LEVELS = {"none": 0, "low": 1, "medium": 2, "high": 3}

# Triton's gRPC message size limit (INT32_MAX) is also grpcio's largest.
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

    def channel_options(self) -> list[tuple[str, int]]:
        if self.compression_level not in COMPRESSION_LEVELS:
            raise ValueError(
                f"--grpc-infer-response-compression-level must be one of {', '.join(COMPRESSION_LEVELS)}, "
                f"got '{self.compression_level}'"
            )
        options = [
            ("grpc.max_send_message_length", self.max_message_size),
            ("grpc.max_receive_message_length", self.max_message_size),
            # grpcio turns SO_REUSEPORT on by default; tritonserver (and the flag) keep it off
            # so that a second server on the same port fails instead of sharing it silently.
            ("grpc.so_reuseport", 1 if self.reuse_port else 0),
            ("grpc.keepalive_time_ms", self.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1 if self.keepalive_permit_without_calls else 0),
            ("grpc.http2.max_pings_without_data", self.http2_max_pings_without_data),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", self.http2_min_recv_ping_interval_without_data_ms),
            ("grpc.http2.max_ping_strikes", self.http2_max_ping_strikes),
        ]
        if self.max_connection_age_ms is not None:
            options.append(("grpc.max_connection_age_ms", self.max_connection_age_ms))
        if self.max_connection_age_grace_ms is not None:
            options.append(("grpc.max_connection_age_grace_ms", self.max_connection_age_grace_ms))
        level = COMPRESSION_LEVELS[self.compression_level]
        if level:
            options.append(("grpc.default_compression_level", level))
        return options

    def credentials(self) -> grpc.ServerCredentials | None:
        if not (self.use_ssl or self.use_ssl_mutual):
            return None
        if not self.server_cert or not self.server_key:
            raise ValueError("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key")
        root = Path(self.root_cert).read_bytes() if self.root_cert else None
        if self.use_ssl_mutual and root is None:
            raise ValueError("--grpc-use-ssl-mutual needs --grpc-root-cert")
        return grpc.ssl_server_credentials(
            [(Path(self.server_key).read_bytes(), Path(self.server_cert).read_bytes())],
            root_certificates=root,
            require_client_auth=self.use_ssl_mutual,
        )


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
    "grpc_header_forward_pattern": "header_forward_pattern",
    "grpc_restricted_protocol": "restricted_protocols",
    "grpc_use_ssl": "use_ssl",
    "grpc_use_ssl_mutual": "use_ssl_mutual",
    "grpc_server_cert": "server_cert",
    "grpc_server_key": "server_key",
    "grpc_root_cert": "root_cert",
    "exit_timeout_secs": "shutdown_grace_s",
}


def build_grpc_server(server: Server, options: GrpcOptions) -> tuple[grpc.aio.Server, int]:
    """A started-ready (not yet started) grpc.aio server bound to its port; returns the
    server and the bound port. Raises RuntimeError when the port cannot be bound."""
    grpc_server = grpc.aio.server(options=options.channel_options())
    forward = re.compile(options.header_forward_pattern) if options.header_forward_pattern else None
    restrictions = parse_restrictions(options.restricted_protocols)
    servicer = InferenceServicer(server, forward)
    _add_service(grpc_server, SERVICE_NAME, method_handlers(servicer, restrictions))
    _add_service(grpc_server, HEALTH_SERVICE_NAME, health_handlers(HealthServicer(server), restrictions))
    address = f"{options.address}:{options.port}"
    if ":" in options.address and not options.address.startswith("["):
        address = f"[{options.address}]:{options.port}"  # an IPv6 literal
    credentials = options.credentials()
    try:
        if credentials is None:
            port = grpc_server.add_insecure_port(address)
        else:
            port = grpc_server.add_secure_port(address, credentials)
    except RuntimeError as exc:
        raise RuntimeError(f"gRPC: unable to listen on {address}: {exc}") from None
    if port == 0:
        raise RuntimeError(f"gRPC: unable to listen on {address}")
    return grpc_server, port


def _add_service(grpc_server: grpc.aio.Server, name: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
    register = getattr(grpc_server, "add_registered_method_handlers", None)
    if register is not None:
        # Registered methods skip the per-call lookup through generic handlers.
        register(name, handlers)
    else:  # grpcio older than 1.62
        grpc_server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))


async def run(server: Server, args: argparse.Namespace, started: asyncio.Event) -> None:
    """Serve gRPC until cancelled; `started` is set once the port listens."""
    options = GrpcOptions.from_args(args)
    grpc_server, port = build_grpc_server(server, options)
    await grpc_server.start()
    log.info("started GRPCInferenceService at %s:%d", options.address, port)
    started.set()
    try:
        await grpc_server.wait_for_termination()
    finally:
        # In-flight calls get the exit timeout to finish, as HTTP requests do.
        await grpc_server.stop(options.shutdown_grace_s)
