"""naiad-openai: an OpenAI-compatible API (`/v1/models`, `/v1/completions`,
`/v1/chat/completions`) in front of the naiad models that follow the text convention of
`convention.py`. See docs/openai.md.

`naiad serve --allow-openai true` starts it beside the KServe frontends (`FRONTEND`, found
through the `naiad.frontends` entry point), on the same in-process server; an application
embedding `naiad.Server` can mount `create_app(server)` in any ASGI server instead.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .chat_template import chat_prompt
    from .convention import follows_convention
    from .frontend import FRONTEND, OpenAIOptions, run

__all__ = ["FRONTEND", "OpenAIOptions", "run", "create_app", "chat_prompt", "follows_convention"]

# `naiad serve` loads FRONTEND to read its flags on every start, with or without
# --allow-openai: the API (starlette, the models' conventions) is imported when first used.
_HOMES = {
    "FRONTEND": "frontend",
    "OpenAIOptions": "frontend",
    "run": "frontend",
    "create_app": "app",
    "chat_prompt": "chat_template",
    "follows_convention": "convention",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'naiad_openai' has no attribute '{name}'")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
