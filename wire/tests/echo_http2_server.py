"""An HTTP/2 server of naiad_wire alone, for tests that watch it from outside (its memory):
`python echo_http2_server.py [max_ping_strikes]` prints its port, then answers every request
with 200 and the request's body. Not a test module."""

from __future__ import annotations

import asyncio
import sys

from naiad_wire.header_compression import encode_headers
from naiad_wire.http2 import Http2Limits, Stream
from naiad_wire.http2_protocol import Http2Connection
from naiad_wire.listen import listen

HEADERS = encode_headers([(":status", "200")])
TRAILERS = encode_headers([("x-done", "1")])


class Echo:
    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.body = bytearray()

    def data_received(self, data: bytes, end_stream: bool) -> None:
        self.body += data
        if end_stream:
            self.stream.respond(HEADERS, bytes(self.body), TRAILERS)

    def stream_reset(self) -> None:
        pass


def on_request(stream: Stream, headers: list[tuple[str, str]], end_stream: bool) -> Echo:
    echo = Echo(stream)
    if end_stream:
        echo.data_received(b"", True)
    return echo


async def main(max_ping_strikes: int) -> None:
    sock = listen("127.0.0.1", 0)
    limits = Http2Limits(max_ping_strikes=max_ping_strikes)
    connections: set[Http2Connection] = set()
    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: Http2Connection(on_request, limits, connections), sock=sock)
    print(sock.getsockname()[1], flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2))
