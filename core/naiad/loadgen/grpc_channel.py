"""grpc.aio, imported when a gRPC step needs it: grpcio is an optional dependency of the
core (`pip install naiad[perf]`), and only `-i grpc` uses it."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .load_error import LoadError
from .target import Target

__all__ = ["SERVICE", "grpc_aio", "open_channel", "rpc_error_text"]

SERVICE = "/inference.GRPCInferenceService/"


def grpc_aio() -> ModuleType:
    try:
        import grpc.aio  # type: ignore[import-untyped]  # grpcio ships no type stubs
    except ImportError:
        raise LoadError("-i grpc needs grpcio: pip install 'naiad[perf]' (or grpcio)") from None
    module: ModuleType = grpc.aio
    return module


def open_channel(target: Target) -> Any:
    """A channel with a connection of its own (a local subchannel pool), so that N channels
    are N connections as perf_analyzer's N contexts are; no message size limit."""
    options = [
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.max_receive_message_length", -1),
        ("grpc.max_send_message_length", -1),
    ]
    return grpc_aio().insecure_channel(str(target), options=options)


def rpc_error_text(error: Any) -> str:
    """An AioRpcError as one line: the server's message, else its status code."""
    details = error.details() if hasattr(error, "details") else None
    code = error.code().name if hasattr(error, "code") else "UNKNOWN"
    return f"{code}: {details}" if details else code
