"""The server side of Triton's model loading API for models: `pb_utils.load_model`,
`unload_model` and `is_model_ready` become the server's own calls, whichever mode the model
runs in. Loading and unloading obey the same rule as the repository API (explicit model
control mode only, as in Triton)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from naiad.backend import NaiadError

if TYPE_CHECKING:
    from naiad.backend import InferenceService as Server

__all__ = ["manage_model"]

# The prefix Triton's load API puts on the keys of override files ("file:1/model.onnx").
_FILE_PREFIX = "file:"


async def manage_model(server: Server | None, action: str, arguments: dict[str, Any]) -> bool:
    """Run `action` ("ready", "load" or "unload"); "ready" answers whether the model is
    ready, the others True. Failures raise NaiadError with the server's reason."""
    if server is None:
        raise NaiadError.unavailable("the model loading API is not available: the model has no server")
    name = arguments["model_name"]
    if action == "ready":
        return server.model_ready(name, arguments.get("model_version", ""))
    server.check_repository_control()
    if action == "load":
        text = arguments.get("config") or ""
        try:
            config = json.loads(text) if text else None
        except ValueError as exc:
            raise NaiadError.invalid(f"failed to load '{name}': config is not JSON: {exc}") from None
        files = arguments.get("files") or {}
        unnamed = [key for key in files if not key.startswith(_FILE_PREFIX)]
        if unnamed:
            raise NaiadError.invalid(
                f"failed to load '{name}': file keys must start with '{_FILE_PREFIX}', got {unnamed}"
            )
        await server.load_model(name, config, {k.removeprefix(_FILE_PREFIX): v for k, v in files.items()} or None)
    elif action == "unload":
        await server.unload_model(name, bool(arguments.get("unload_dependents", False)))
    else:
        raise NaiadError.invalid(f"unknown model loading action '{action}'")
    return True
