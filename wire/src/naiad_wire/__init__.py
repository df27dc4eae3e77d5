"""naiad_wire: naiad's transports, a package of their own that imports nothing of naiad.

- `http1`: the HTTP/1.1 server (httptools in an asyncio Protocol) for an ASGI app.
- `http2`: the HTTP/2 server connection as a sans-IO state machine; `http2_protocol`: the
  asyncio Protocol that feeds it.
- `header_compression`: HPACK, with its RFC tables in `static_table` and `huffman`.
  `request_headers`: RFC 9113's rules for request headers.
- `grpc_framing`, `grpc_status`: gRPC's messages, compression, timeouts and status codes.
- `connections`: closing without losing the last answer, draining at shutdown.
- `listen`: binds every listening socket; `balance`: evens out the connections of the
  processes that share a port.
- `interprocess`: framed messages between processes of one host, their tensors in
  shared-memory rings (the front doors and the model home; a Python model's process).

The modules every request runs through are compiled with mypyc when the package is built
(setup.py); `compiled_modules` names those that run compiled here (or in another package).
"""

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from .listen import listen

__all__ = ["listen", "compiled_modules"]


def compiled_modules(package: Path | None = None) -> list[str]:
    """The modules of `package` (a package's directory; by default this one's) that import as
    C extensions, named from it (``frontends.grpc.codec``); empty when all are pure Python."""
    root = package or Path(__file__).parent
    return sorted(
        ".".join(path.relative_to(root).with_name(path.name.split(".", 1)[0]).parts)
        for path in root.rglob("*")
        if path.name.endswith(tuple(EXTENSION_SUFFIXES))
    )
