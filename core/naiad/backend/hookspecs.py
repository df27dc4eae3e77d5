"""The plugin hooks a backend package implements.

A backend distribution registers a module (or object) carrying `@hookimpl` functions in
the entry-point group `naiad.backends`::

    [project.entry-points."naiad.backends"]
    onnxruntime = "naiad_backend_onnx.plugin"

An entry point may also name a `Backend` subclass itself (`echo = "naiad_backend_echo:EchoBackend"`):
the server then registers a plugin whose `naiad_backends` returns that class, so a backend
with one class needs no plugin module.

The server creates its own `pluggy.PluginManager` at start-up and loads that group; nothing
happens at import time.

As in pluggy's own specifications, a hook's body is its docstring alone: pluggy calls the
plugins' implementations, never the specification.
"""

from __future__ import annotations

import pluggy

from .abi import Backend

__all__ = ["PROJECT", "ENTRY_POINT_GROUP", "hookspec", "hookimpl", "BackendHookSpecs"]

PROJECT = "naiad"
ENTRY_POINT_GROUP = "naiad.backends"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class BackendHookSpecs:
    """Hook specifications for backend plugins."""

    @hookspec
    def naiad_backends(self) -> list[type[Backend]] | None:
        """Return the Backend classes this plugin provides.

        Each class's `name` is the name configs use (`backend: "onnxruntime"`); the server
        instantiates a class once, on the first model that needs it, and calls
        `initialize` with that backend's `--backend-config` settings. A plugin may return
        several classes; two plugins offering the same name is a start-up error. None, which
        pluggy leaves out of the results, provides nothing (a plugin whose framework is absent).

        .. versionadded:: 1.0
        """
