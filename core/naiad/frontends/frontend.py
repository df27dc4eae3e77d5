"""`Frontend`: what a package registers to be served by `naiad serve`.

A frontend is found through the entry point group `naiad.frontends` (naiad's own HTTP, gRPC
and metrics frontends are registered there too, so the command line names none of them). The
entry point names a `Frontend` object; its options class declares the flags (`option`
fields, a `--allow-...` flag as the field `enabled`), so a frontend brings its own flags, and
its `run` receives its options object typed, never the command line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

if TYPE_CHECKING:
    from ..server import Server

__all__ = ["ENTRY_POINT_GROUP", "Frontend"]

ENTRY_POINT_GROUP: Final = "naiad.frontends"

Options = TypeVar("Options")


@dataclass(frozen=True, slots=True, kw_only=True)
class Frontend(Generic[Options]):
    """One frontend `naiad serve` can start.

    `run(server, options, started)` serves until cancelled and sets `started` once it listens
    (an exception before that is a start-up failure `naiad serve` reports). `options` is a
    frozen dataclass of `option` fields with an `enabled: bool` field (the flag that turns
    the frontend on); a field `address: str | None` left None takes the address of the
    frontend named by `address_from`; a field `reuse_port: bool` is set when several worker
    processes share the port."""

    name: str
    # The title of its flags' group in `naiad serve --help`.
    title: str
    options: type[Options]
    run: Callable[[Server, Options, asyncio.Event], Coroutine[Any, Any, None]]
    # Frontends start (and their flags are listed) in this order, lowest first.
    order: int = 100
    # False: only the process that holds the models serves it (the metrics of several
    # workers are the model home's); True: every worker process serves it on a shared port.
    on_every_worker: bool = True
    address_from: str | None = None
    # Modules imported before the worker processes fork, so each starts with them loaded
    # (a `run` that imports its frontend lazily names it here).
    imports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        fields: dict[str, Any] = getattr(self.options, "__dataclass_fields__", {})
        if "enabled" not in fields:
            raise TypeError(f"frontend '{self.name}': {self.options.__name__} has no 'enabled' field")
