"""One write of an answer in pieces, as both of naiad's servers make it: joined into one plain
write while it is small, and handed to the transport as it is once it is large, where uvloop
sends it with one `writev` and the payloads are not copied."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

__all__ = ["GATHERED_BYTES", "write_pieces"]

# From this many bytes the pieces go out as they are; below it, one joined write (the path
# small answers are measured on) costs less than the transport's gathered write.
GATHERED_BYTES = 64 * 1024


def write_pieces(transport: asyncio.Transport, pieces: Sequence[bytes | memoryview]) -> None:
    """`pieces`, in order, in one call to `transport`."""
    if len(pieces) == 1:
        transport.write(pieces[0])
        return
    size = 0
    for piece in pieces:
        size += len(piece)
    if size < GATHERED_BYTES:
        transport.write(b"".join(pieces))
    else:
        transport.writelines(pieces)
