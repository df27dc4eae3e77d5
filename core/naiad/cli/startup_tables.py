"""The tables `naiad serve` prints at start-up, laid out as tritonserver prints them: the
backends in use, every model with its state, and the options the server runs with."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import naiad_wire

from ..scheduling.rate_limiter import ResourceLimit
from ..server import Server, ServerOptions
from ..version import __version__
from .text_table import text_table

__all__ = ["backend_table", "compiled_modules", "model_table", "options_table"]

# tritonserver's names for the model control modes.
_CONTROL_MODES = {"none": "MODE_NONE", "poll": "MODE_POLL", "explicit": "MODE_EXPLICIT"}


def model_table(server: Server) -> str:
    rows = []
    for row in server.repository_index():
        state = row.get("state", "UNAVAILABLE")
        reason = row.get("reason", "")
        status = f"{state}: {reason}" if reason and state != "READY" else state
        rows.append((row["name"], row.get("version", "-"), status))
    return text_table(("Model", "Version", "Status"), rows)


def backend_table(server: Server) -> str:
    """The backends models use, with the Python module that provides each (tritonserver
    shows the shared library) and the settings each was initialized with."""
    assert server.backends is not None
    rows = [
        (name, module, json.dumps({"cmdline": settings}, sort_keys=True))
        for name, module, settings in server.backends.initialized()
    ]
    return text_table(("Backend", "Module", "Config"), rows)


def _resource_row(resource: ResourceLimit) -> str:
    # tritonserver's layout, its missing comma included: log readers match the line as it is.
    device = -1 if resource.device is None else resource.device
    return f'{{"name":"{resource.name}", "count":{resource.count} "device":{device}}}'


def options_table(server: Server, extra: Sequence[tuple[str, str]] = ()) -> str:
    options: ServerOptions = server.options
    metadata = server.metadata()
    rows = [
        ("server_id", options.server_id),
        ("server_version", f"{__version__} (naiad)"),
        ("server_extensions", " ".join(metadata["extensions"])),
        *((f"model_repository_path[{i}]", path) for i, path in enumerate(options.model_repositories)),
        ("model_control_mode", _CONTROL_MODES.get(options.model_control_mode, options.model_control_mode)),
        ("strict_model_config", str(int(not options.auto_complete_config))),
        ("model_config_name", options.model_config_name),
        ("rate_limit", "EXEC_COUNT" if server.rate_limiter.enabled else "OFF"),
        *(
            (f"rate_limit_resource[{i}]", _resource_row(r))
            for i, r in enumerate(
                sorted(options.rate_limit_resources, key=lambda r: (r.name, -1 if r.device is None else r.device))
            )
        ),
        ("strict_readiness", str(int(options.strict_readiness))),
        ("exit_timeout", f"{options.exit_timeout_secs:g}"),
        ("cache_enabled", str(int(server.response_cache is not None))),
        *extra,
    ]
    return text_table(("Option", "Value"), rows)


def compiled_modules() -> str:
    """How many of the request path's modules run compiled (a build with a C compiler
    compiles them with mypyc; without one they are pure Python, about a tenth slower)."""
    core = naiad_wire.compiled_modules(Path(__file__).parents[1])
    wire = naiad_wire.compiled_modules()
    if not core and not wire:
        return "0 (pure Python, slower)"
    return f"{len(core)} naiad, {len(wire)} naiad_wire"
