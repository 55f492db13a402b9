"""Measure recorded requests: parts, prefix stability, human input, tool pairing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from foldwise.durable import AUTHORITY_CONTRACT, is_durable_data_message
from foldwise.messages import analyze_tool_pairing, is_hidden, message_text
from foldwise.replay._probe import RequestSnapshot
from foldwise.tokens import TokenCounter

__all__ = [
    "Parts",
    "cached_prefix",
    "human_texts",
    "is_context_block",
    "measure_parts",
    "pairing_violations",
    "prefix_blocks",
]


@dataclass(frozen=True)
class Parts:
    """Tokens of one request by part."""

    system: int
    tools: int
    durable: int
    messages: int

    @property
    def total(self) -> int:
        """The whole request."""
        return self.system + self.tools + self.durable + self.messages


def is_context_block(message: BaseMessage) -> bool:
    """The durable data block, its authority contract, or a peer's summary message."""
    if is_durable_data_message(message):
        return True
    if isinstance(message, SystemMessage) and message.content == AUTHORITY_CONTRACT:
        return True
    return message.additional_kwargs.get("lc_source") == "summarization"


def measure_parts(snapshot: RequestSnapshot, counter: TokenCounter) -> Parts:
    """Count a request's system prompt, tool schemas, durable/summary block and messages."""
    system = counter.count_message(snapshot.system) if snapshot.system is not None else 0
    durable = messages = 0
    for message in snapshot.messages:
        tokens = counter.count_message(message)
        if is_context_block(message):
            durable += tokens
        elif isinstance(message, SystemMessage):
            system += tokens
        else:
            messages += tokens
    return Parts(system, counter.count_tools(snapshot.tools), durable, messages)


def _fingerprint(message: BaseMessage) -> int:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)
    calls = repr(message.tool_calls) if isinstance(message, AIMessage) else ""
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else ""
    return hash((message.type, message.name, text, calls, call_id))


def prefix_blocks(snapshot: RequestSnapshot, counter: TokenCounter) -> list[tuple[int, int]]:
    """The request as a sequence of `(fingerprint, tokens)` blocks, in sending order.

    Providers cache a request's leading part; a block counts as cached when it and every block
    before it are identical to the previous request's.
    """
    blocks: list[tuple[int, int]] = []
    tools_text = json.dumps(
        [getattr(t, "name", repr(t)) for t in snapshot.tools], ensure_ascii=False
    )
    blocks.append((hash(("tools", tools_text)), counter.count_tools(snapshot.tools)))
    if snapshot.system is not None:
        blocks.append((_fingerprint(snapshot.system), counter.count_message(snapshot.system)))
    blocks.extend((_fingerprint(m), counter.count_message(m)) for m in snapshot.messages)
    return blocks


def cached_prefix(previous: Sequence[tuple[int, int]], current: Sequence[tuple[int, int]]) -> int:
    """Tokens of `current`'s leading blocks identical to `previous`'s."""
    cached = 0
    for (old, _), (new, tokens) in zip(previous, current, strict=False):
        if old != new:
            break
        cached += tokens
    return cached


def human_texts(messages: Sequence[BaseMessage]) -> set[str]:
    """Texts of the user's messages in a request (framework and summary messages excluded)."""
    return {
        message_text(m)
        for m in messages
        if isinstance(m, HumanMessage) and not is_hidden(m) and not is_context_block(m)
    }


def pairing_violations(messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """`(tool results without their call, tool calls without their result)` in a request."""
    pairing = analyze_tool_pairing(messages)
    return len(pairing.orphan_results), len(pairing.pending_calls)


def state_messages(state: dict[str, Any]) -> list[BaseMessage]:
    """The messages channel of an agent state."""
    messages = state.get("messages") or []
    return [m for m in messages if isinstance(m, BaseMessage)]
