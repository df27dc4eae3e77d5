"""Model control from `model.py` (Triton's `pb_utils.load_model` and friends) and the model's
directory; each goes to the server through the bridge."""

from __future__ import annotations

from typing import Any

from .bridge import current_bridge
from .errors import TritonModelException, text_argument

__all__ = ["get_model_dir", "load_model", "unload_model", "is_model_ready"]


def get_model_dir() -> str:
    """The directory of the running model's file (its version directory), as Triton gives it."""
    bridge = current_bridge()
    if bridge is None or not bridge.model_dir:
        raise TritonModelException("get_model_dir() is only available inside a loaded model")
    return bridge.model_dir


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) a model, as the repository API's load does: `config` is a model
    config in JSON that replaces the model's own, `files` ({"file:1/model.onnx": content})
    its directory (and then needs `config`). Only in explicit model control mode, as in
    Triton; a failure raises TritonModelException with the server's reason."""
    _manage_model(
        "load",
        model_name=text_argument(model_name, "load_model model_name"),
        config=text_argument(config, "load_model config"),
        files=dict(files or {}),
    )


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload a model (with `unload_dependents`, an ensemble's unused steps too)."""
    _manage_model(
        "unload",
        model_name=text_argument(model_name, "unload_model model_name"),
        unload_dependents=bool(unload_dependents),
    )


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the model (the version given, or the one its policy serves) is ready."""
    version = model_version if isinstance(model_version, int) else text_argument(model_version, "model_version")
    return bool(
        _manage_model(
            "ready", model_name=text_argument(model_name, "is_model_ready model_name"), model_version=str(version)
        )
    )


def _manage_model(action: str, **arguments: Any) -> Any:
    bridge = current_bridge()
    if bridge is None:
        raise TritonModelException("the model loading API is only available inside a loaded model")
    return bridge.manage_model(action, arguments)
