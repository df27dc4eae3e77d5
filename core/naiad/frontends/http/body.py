"""Reading a request body off the ASGI channel: bounded by --http-max-input-size, and
decompressed when the client sent it gzip- or deflate-encoded (tritonclient's
`request_compression_algorithm`)."""

from __future__ import annotations

import zlib

from starlette.requests import ClientDisconnect
from starlette.types import Receive

from ...errors import ErrorCode, NaiadError

__all__ = ["BodyReader", "UnsupportedContentEncoding", "SUPPORTED_ENCODINGS"]

SUPPORTED_ENCODINGS = "gzip, deflate"


class UnsupportedContentEncoding(NaiadError):
    """A body in an encoding naiad cannot decompress: the client's error, answered as Triton
    answers it, 415 Unsupported Media Type with `Accept-Encoding: gzip, deflate`."""

    def __init__(self, encoding: str) -> None:
        super().__init__(ErrorCode.INVALID_ARG, f"unsupported Content-Encoding '{encoding}'; use gzip or deflate")


class BodyReader:
    """Reads whole bodies of at most `max_input_size` bytes (after decompression too)."""

    def __init__(self, max_input_size: int) -> None:
        self.max_input_size = max_input_size

    async def read(self, receive: Receive, content_length: str | None, content_encoding: str | None) -> bytes:
        """The body; INVALID_ARG once it passes the limit, ClientDisconnect if the client left."""
        limit = self.max_input_size
        if content_length is not None and content_length.isdigit() and int(content_length) > limit:
            raise self.too_large(int(content_length))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise self.too_large(size)
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return self.decoded(chunks[0] if len(chunks) == 1 else b"".join(chunks), content_encoding)

    def decoded(self, body: bytes, content_encoding: str | None) -> bytes:
        """A whole body, decompressed per its Content-Encoding and checked against the limit."""
        if len(body) > self.max_input_size:
            raise self.too_large(len(body))
        encoding = (content_encoding or "").strip().lower()
        if encoding and encoding != "identity" and body:
            body = self._decompress(body, encoding)
        return body

    def _decompress(self, body: bytes, encoding: str) -> bytes:
        if encoding == "gzip":
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decompressor = zlib.decompressobj()
        else:
            raise UnsupportedContentEncoding(encoding)
        try:
            # One byte past the limit is enough to know the body is too large.
            result = decompressor.decompress(body, self.max_input_size + 1)
        except zlib.error as exc:
            raise NaiadError.invalid(f"the {encoding} request body does not decompress: {exc}") from None
        if len(result) > self.max_input_size:
            raise self.too_large(len(result), decompressed=True)
        return result

    def too_large(self, size: int, decompressed: bool = False) -> NaiadError:
        what = "decompressed request body" if decompressed else "request body"
        return NaiadError.invalid(
            f"the {what} is larger than the {self.max_input_size} bytes --http-max-input-size allows "
            f"({size} bytes or more)"
        )
