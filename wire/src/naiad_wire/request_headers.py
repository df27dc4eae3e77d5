"""What RFC 9113 (sections 8.2 and 8.3) requires of a request's header fields, checked once
per header block before a stream reaches the application. A request that breaks a rule is
malformed: the connection resets that stream with PROTOCOL_ERROR and serves on.

Kept free of I/O and of gRPC: it takes decoded (name, value) pairs and says what is wrong.
"""

from __future__ import annotations

import re

__all__ = ["MalformedRequest", "check_request", "check_trailers"]

_PSEUDO_REQUEST = frozenset({":method", ":scheme", ":path", ":authority"})
# Regular fields with a rule of their own: those that mean something only to one HTTP/1.1 hop
# (RFC 9113 8.2.2), `te`, and `content-length`.
_SPECIAL = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "content-length"}
)
# A field name is a token in lowercase (RFC 9113 8.2.1, RFC 9110 5.1).
_VALID_NAME = re.compile(r"[a-z0-9!#$%&'*+\-.^_`|~]+")
# Names a connection has seen valid, remembered up to this many: clients send the same few
# names on every request, and a set lookup is cheaper than the pattern.
_KNOWN_NAMES = 256


class MalformedRequest(Exception):
    """A header block that makes the request malformed: a stream error (PROTOCOL_ERROR)."""


def check_request(headers: list[tuple[str, str]], known_names: set[str]) -> int | None:
    """Raise MalformedRequest unless `headers` are a valid request header section; returns
    the content-length it declares (None without one). `known_names` is the connection's
    memory of valid names; this adds to it."""
    pseudo: dict[str, str] = {}
    regular = False
    content_length: int | None = None
    for name, value in headers:
        if name[:1] == ":":
            if regular:
                raise MalformedRequest(f"pseudo-header {name} after a regular field")
            if name not in _PSEUDO_REQUEST:
                raise MalformedRequest(f"pseudo-header {name} is not one of a request")
            if name in pseudo:
                raise MalformedRequest(f"pseudo-header {name} appears twice")
            pseudo[name] = value
            continue
        regular = True
        if name not in known_names:
            if _VALID_NAME.fullmatch(name) is None:
                raise MalformedRequest(f"field name {name!r} is not a lowercase token")
            if len(known_names) >= _KNOWN_NAMES:
                known_names.clear()
            known_names.add(name)
        if name in _SPECIAL:
            if name == "content-length":
                if not value.isdigit() or (content_length is not None and int(value) != content_length):
                    raise MalformedRequest(f"content-length {value!r}")
                content_length = int(value)
            elif name != "te" or value != "trailers":
                raise MalformedRequest(f"connection-specific field {name}: {value!r}")
    method = pseudo.get(":method")
    if method is None:
        raise MalformedRequest("no :method")
    if method == "CONNECT":
        if ":authority" not in pseudo or ":scheme" in pseudo or ":path" in pseudo:
            raise MalformedRequest("CONNECT needs :authority and neither :scheme nor :path")
    elif ":scheme" not in pseudo or not pseudo.get(":path"):
        raise MalformedRequest("no :scheme, or no or an empty :path")
    return content_length


def check_trailers(headers: list[tuple[str, str]]) -> None:
    """Trailers carry no pseudo-headers (RFC 9113 8.1)."""
    for name, _ in headers:
        if name[:1] == ":":
            raise MalformedRequest(f"pseudo-header {name} in trailers")
