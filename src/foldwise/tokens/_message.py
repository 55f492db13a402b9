"""What one message costs: content blocks, role, name, tool calls and framing overhead."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "content_tokens",
    "message_tokens",
    "to_json",
]

MESSAGE_OVERHEAD = 4
"""Framing of one chat message (start/end markers and the role), as in OpenAI's chat format."""
TOOL_CALL_OVERHEAD = 4
"""Framing of one tool call (type, separators) on top of its name, id and arguments."""
IMAGE_TOKENS = 85
"""Flat cost of an image block (OpenAI's low-detail price; the size is not inspected)."""

_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})


def to_json(value: Any) -> str:
    """Serialize `value` as tool arguments and non-text blocks are sent (UTF-8 JSON)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def content_tokens(content: Any, count_text: Callable[[str], int]) -> int:
    """Count the tokens of a message `content`: a string or a list of content blocks.

    Text blocks count as their text, image blocks a flat `IMAGE_TOKENS`, and any other block
    (reasoning, tool use, files...) as its JSON.
    """
    if isinstance(content, str):
        return count_text(content)
    if not isinstance(content, list | tuple):
        return count_text(str(content))
    total = 0
    for block in content:
        if isinstance(block, str):
            total += count_text(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            text = block.get("text")
            if kind in _TEXT_TYPES and isinstance(text, str):
                total += count_text(text)
            elif kind in _IMAGE_TYPES or "image_url" in block:
                total += IMAGE_TOKENS
            else:
                total += count_text(to_json(block))
        else:
            total += count_text(str(block))
    return total


def message_tokens(message: BaseMessage, count_text: Callable[[str], int]) -> int:
    """Count one message: overhead + content + name + tool calls + tool call id."""
    total = MESSAGE_OVERHEAD + content_tokens(message.content, count_text)
    if message.name:
        total += 1 + count_text(message.name)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            total += TOOL_CALL_OVERHEAD + count_text(call["name"]) + count_text(call["id"] or "")
            total += count_text(to_json(call["args"]))
        for bad in message.invalid_tool_calls:
            total += TOOL_CALL_OVERHEAD + count_text(bad.get("name") or "")
            total += count_text(bad.get("args") or "") + count_text(bad.get("id") or "")
    elif isinstance(message, ToolMessage):
        total += count_text(message.tool_call_id)
    return total
