"""naiad_wire: naiad's transports, a package of their own that imports nothing of naiad.

- `http1`: the HTTP/1.1 server (httptools in an asyncio Protocol) for an ASGI app.
- `http2`: the HTTP/2 server connection as a sans-IO state machine; `http2_protocol`: the
  asyncio Protocol that feeds it.
- `header_compression`: HPACK. `request_headers`: RFC 9113's rules for request headers.
- `grpc_framing`, `grpc_status`: gRPC's messages, compression, timeouts and status codes.
- `connections`: closing without losing the last answer, draining at shutdown.
- `listen`: binds every listening socket; `balance`: evens out the connections of the
  processes that share a port.
"""

from .listen import listen

__all__ = ["listen"]
