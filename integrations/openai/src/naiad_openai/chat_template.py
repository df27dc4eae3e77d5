"""The chat template: OpenAI chat messages as one prompt, without a tokenizer library.

Each message becomes a line `<role>: <content>`, and a last line `assistant:` asks the model
for the assistant's turn::

    system: You are terse.
    user: Say hello
    assistant:

Content given as a list of parts keeps its text parts, joined by spaces.
"""

from __future__ import annotations

from typing import Any

from naiad import NaiadError

__all__ = ["chat_prompt"]


def chat_prompt(messages: Any) -> str:
    """The prompt for a `messages` list; INVALID_ARG naming the message at fault."""
    if not isinstance(messages, list) or not messages:
        raise NaiadError.invalid("'messages' must be a non-empty list")
    lines = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise NaiadError.invalid(f"messages[{index}] must be an object with a 'role' string")
        lines.append(f"{message['role']}: {_content(message.get('content'), index)}")
    lines.append("assistant:")
    return "\n".join(lines)


def _content(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        if all(isinstance(text, str) for text in texts):
            return " ".join(texts)
    raise NaiadError.invalid(f"messages[{index}].content must be a string or a list of text parts")
