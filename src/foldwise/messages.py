"""Message conventions and analysis shared by every foldwise component.

Flags live in `additional_kwargs` so they survive serialization and checkpoints:

- `hide_from_ui`: framework messages (the durable data block) that UIs and transcripts skip.
- `durable_context_data`: the hidden data message rendered by `DurableContextMiddleware`.
- `dynamic_context_reminder`: reminders rescued by id across compaction.
- `foldwise_offload`: set on a message whose content was replaced by a preview; holds the
  artifact reference (`artifact_id`, `chars`, `tokens`, `source`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from foldwise.errors import MessageFormatError

__all__ = [
    "DURABLE_DATA_FLAG",
    "DYNAMIC_REMINDER_FLAG",
    "HIDE_FROM_UI_FLAG",
    "OFFLOAD_FLAG",
    "SUMMARY_MESSAGE_NAME",
    "ToolPairing",
    "analyze_tool_pairing",
    "ensure_message_ids",
    "is_cut_off_answer",
    "is_dynamic_reminder",
    "is_hidden",
    "is_real_user_message",
    "message_text",
    "split_content",
    "validate_messages",
]

HIDE_FROM_UI_FLAG = "hide_from_ui"
DURABLE_DATA_FLAG = "durable_context_data"
DYNAMIC_REMINDER_FLAG = "dynamic_context_reminder"
OFFLOAD_FLAG = "foldwise_offload"
SUMMARY_MESSAGE_NAME = "summary"

_KNOWN_TYPES = ("human", "ai", "system", "tool", "AIMessageChunk", "remove")


def is_hidden(message: BaseMessage) -> bool:
    """Whether the message is a framework message hidden from users."""
    return bool(message.additional_kwargs.get(HIDE_FROM_UI_FLAG))


def is_dynamic_reminder(message: BaseMessage) -> bool:
    """Whether the message is a dynamic-context reminder that compaction must keep."""
    return isinstance(message, HumanMessage | SystemMessage) and bool(
        message.additional_kwargs.get(DYNAMIC_REMINDER_FLAG)
    )


def is_real_user_message(message: BaseMessage) -> bool:
    """Whether the message is the user's own words (not a summary or hidden framework text)."""
    return (
        isinstance(message, HumanMessage)
        and message.name != SUMMARY_MESSAGE_NAME
        and not is_hidden(message)
        and not message.additional_kwargs.get(DYNAMIC_REMINDER_FLAG)
    )


def message_text(message: BaseMessage) -> str:
    """The text of a message: string content, or its text blocks joined."""
    return split_content(message.content)[0]


def split_content(content: str | list[Any]) -> tuple[str, list[Any]]:
    """The text of a message content and its non-text blocks.

    String content is its own text. For block lists, text blocks (and bare strings) are joined
    with newlines; every other block (images, files, ...) is returned to be kept as is.
    """
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    others: list[Any] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            others.append(block)
    return "\n".join(texts), others


def validate_messages(messages: Sequence[object]) -> None:
    """Check that every item is a well-formed message.

    Raises:
        MessageFormatError: Naming the index and field of the first malformed message.
    """
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise MessageFormatError(
                f"expected a LangChain message, got {type(message).__name__}", index=index
            )
        if message.type not in _KNOWN_TYPES:
            raise MessageFormatError(f"unknown role {message.type!r}", index=index, field="type")
        if isinstance(message, ToolMessage) and not message.tool_call_id:
            raise MessageFormatError(
                "tool message without a tool_call_id", index=index, field="tool_call_id"
            )
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if not call.get("id"):
                    raise MessageFormatError(
                        f"tool call {call.get('name')!r} has no id", index=index, field="tool_calls"
                    )


def ensure_message_ids(messages: Sequence[BaseMessage]) -> None:
    """Give every message without an id a fresh one, in place (as LangGraph's reducer does)."""
    for message in messages:
        if not message.id:
            message.id = str(uuid.uuid4())


@dataclass(frozen=True)
class ToolPairing:
    """Where each tool call and its result sit in a message list.

    Attributes:
        pairs: `(ai_index, tool_index)` for every tool result whose call was found.
        orphan_results: Indices of tool messages whose call is nowhere before them.
        pending_calls: `(ai_index, tool_call_id)` for calls that have no result (yet).
    """

    pairs: tuple[tuple[int, int], ...]
    orphan_results: tuple[int, ...]
    pending_calls: tuple[tuple[int, str], ...]

    def forbidden_cuts(self, length: int) -> list[bool]:
        """For each cut position `c` in `0..length`, whether cutting there splits a pair.

        Cutting at `c` means `messages[:c]` is summarized and `messages[c:]` kept; it splits a
        pair when the call is before `c` and its result at or after it.
        """
        delta = [0] * (length + 2)
        for ai_index, tool_index in self.pairs:
            lo, hi = min(ai_index, tool_index), max(ai_index, tool_index)
            delta[lo + 1] += 1
            delta[hi + 1] -= 1
        forbidden: list[bool] = []
        running = 0
        for c in range(length + 1):
            running += delta[c]
            forbidden.append(running > 0)
        return forbidden


def analyze_tool_pairing(messages: Sequence[BaseMessage]) -> ToolPairing:
    """Find every call/result pair, orphan result and pending call, in one pass."""
    open_calls: dict[str, int] = {}
    answered: set[tuple[int, str]] = set()
    pairs: list[tuple[int, int]] = []
    orphans: list[int] = []
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    open_calls[str(call["id"])] = index
        elif isinstance(message, ToolMessage):
            ai_index = open_calls.get(message.tool_call_id)
            if ai_index is None:
                orphans.append(index)
            else:
                pairs.append((ai_index, index))
                answered.add((ai_index, message.tool_call_id))
    pending = tuple(
        (ai_index, call_id)
        for call_id, ai_index in open_calls.items()
        if (ai_index, call_id) not in answered
    )
    return ToolPairing(tuple(pairs), tuple(orphans), pending)


def is_cut_off_answer(message: Any) -> bool:
    """Whether an OpenAI-protocol answer lacks the end marker every whole answer carries.

    Chat Completions ends each choice with a `finish_reason` and the Responses API answers
    with a `status`; langchain-openai keeps a stream that stopped early as if it were whole
    (and parses a half-sent tool call's arguments as they are). Other providers are not judged.
    """
    if not isinstance(message, AIMessage):
        return False
    meta = message.response_metadata or {}
    return (
        meta.get("model_provider") == "openai"
        and "finish_reason" not in meta
        and "status" not in meta
    )
