"""`LoadError`: why a load step cannot run (a model the server does not know, a shape that
does not fit, a data file that does not parse, a server that cannot be reached). Its text
is one line meant for the person at the command line."""

from __future__ import annotations

__all__ = ["LoadError", "ServerUnreachable"]


class LoadError(Exception):
    pass


class ServerUnreachable(LoadError):
    """No connection to the server (as opposed to an answer that refuses something)."""
