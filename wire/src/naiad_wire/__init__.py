"""naiad_wire: naiad's transports, a package of their own that imports nothing of naiad.

- `http1`: the HTTP/1.1 server (httptools in an asyncio Protocol) for an ASGI app.
- `http2`: the HTTP/2 server connection as a sans-IO state machine; `http2_protocol`: the
  asyncio Protocol that feeds it.
- `header_compression`: HPACK. `request_headers`: RFC 9113's rules for request headers.
- `grpc_framing`, `grpc_status`: gRPC's messages, compression, timeouts and status codes.
- `connections`: closing without losing the last answer, draining at shutdown.
- `listen`: binds every listening socket; `balance`: evens out the connections of the
  processes that share a port.

The modules every request runs through are compiled with mypyc when the package is built
(setup.py); `compiled_modules` names those that run compiled here.
"""

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from .listen import listen

__all__ = ["listen", "compiled_modules"]


def compiled_modules() -> list[str]:
    """The modules of this package that import as C extensions (empty: all pure Python)."""
    return sorted(
        path.name.split(".", 1)[0]
        for path in Path(__file__).parent.iterdir()
        if path.name.endswith(tuple(EXTENSION_SUFFIXES))
    )
