"""`split_endpoint`: a server endpoint as the command line takes it (HOST:PORT, as tritonclient
and perf_analyzer do, or a URL with one of a few schemes), checked and split."""

from __future__ import annotations

import urllib.parse

__all__ = ["split_endpoint"]


def split_endpoint(url: str, flag: str, schemes: tuple[str, ...]) -> urllib.parse.SplitResult:
    """`url` split, with `http://` put in front of a bare HOST:PORT; ValueError naming `flag`
    and what is wrong: a scheme not in `schemes`, no host, or a port that is not one."""
    text = url.strip().rstrip("/")
    if "://" not in text:
        text = f"http://{text}"
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in schemes:
        allowed = " or ".join(schemes)
        raise ValueError(f"{flag} '{url}': the scheme must be {allowed}, not '{parts.scheme}'")
    if not parts.hostname:
        raise ValueError(f"{flag} '{url}' names no host (expected HOST:PORT, e.g. localhost:8000)")
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ValueError(f"{flag} '{url}': the port is not a number from 0 to 65535") from None
    return parts
