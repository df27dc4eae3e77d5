"""naiad-openai: an OpenAI-compatible API (`/v1/models`, `/v1/completions`,
`/v1/chat/completions`) in front of the naiad models that follow the text convention of
`convention.py`. See docs/openai.md.

`naiad serve --allow-openai true` starts it beside the KServe frontends (`FRONTEND`, found
through the `naiad.frontends` entry point), on the same in-process server; an application
embedding `naiad.Server` can mount `create_app(server)` in any ASGI server instead.
"""

from __future__ import annotations

from .app import create_app
from .chat_template import chat_prompt
from .convention import follows_convention
from .frontend import FRONTEND, OpenAIOptions, run

__all__ = ["FRONTEND", "OpenAIOptions", "run", "create_app", "chat_prompt", "follows_convention"]
