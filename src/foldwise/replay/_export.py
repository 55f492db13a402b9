"""`dump_trace`: write LangChain messages as a trace file in any format `load_trace` reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from foldwise.messages import message_text

__all__ = ["ExportFormat", "dump_trace", "to_anthropic_messages", "to_openai_messages"]

ExportFormat = Literal["openai", "openai-requests", "anthropic", "langchain"]


def _openai(message: BaseMessage) -> dict[str, Any]:
    content = message.content
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": content or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["args"], ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        return out
    raise ValueError(f"cannot export a {message.type} message")


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Chat-completions messages."""
    return [_openai(m) for m in messages]


def to_anthropic_messages(
    messages: Sequence[BaseMessage],
) -> tuple[str | None, list[dict[str, Any]]]:
    """`(system, messages)` in the Messages API shape; tool results join the next user turn."""
    system = "\n\n".join(m.text for m in messages if isinstance(m, SystemMessage)) or None
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if out and out[-1]["role"] == "user":
            blocks: list[dict[str, Any]] = out[-1]["content"]
            return blocks
        out.append({"role": "user", "content": []})
        fresh: list[dict[str, Any]] = out[-1]["content"]
        return fresh

    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, HumanMessage):
            user_blocks().append({"type": "text", "text": message_text(message)})
        elif isinstance(message, ToolMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message_text(message),
            }
            if message.status == "error":
                block["is_error"] = True
            user_blocks().append(block)
        elif isinstance(message, AIMessage):
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                for c in message.tool_calls
            )
            out.append({"role": "assistant", "content": blocks})
    return system, out


def dump_trace(
    messages: Sequence[BaseMessage],
    format: ExportFormat = "openai",
    *,
    tools: Sequence[dict[str, Any]] = (),
) -> str:
    """The text of a trace file holding `messages`.

    Args:
        messages: The conversation.
        format: `openai` (JSONL, one message per line), `openai-requests` (JSONL, one
            chat-completions request per assistant call, each with the history so far and its
            `response`), `anthropic` (one Messages API request object with `system` and
            `tools`) or `langchain` (a JSON array of `messages_to_dict` dicts).
        tools: Tool schemas in OpenAI function format.
    """
    if format == "openai":
        return "".join(
            json.dumps(m, ensure_ascii=False) + "\n" for m in to_openai_messages(messages)
        )
    if format == "openai-requests":
        lines = []
        history: list[BaseMessage] = []
        for message in messages:
            if isinstance(message, AIMessage):
                request: dict[str, Any] = {"messages": to_openai_messages(history)}
                if tools:
                    request["tools"] = list(tools)
                request["response"] = _openai(message)
                lines.append(json.dumps(request, ensure_ascii=False))
            history.append(message)
        return "\n".join(lines) + "\n"
    if format == "anthropic":
        system, converted = to_anthropic_messages(messages)
        body: dict[str, Any] = {"messages": converted}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {
                    "name": t["function"]["name"],
                    "description": t["function"].get("description", ""),
                    "input_schema": t["function"].get("parameters", {}),
                }
                for t in tools
            ]
        return json.dumps(body, ensure_ascii=False, indent=1) + "\n"
    if format == "langchain":
        return json.dumps(messages_to_dict(list(messages)), ensure_ascii=False, indent=1) + "\n"
    raise ValueError(f"unknown export format {format!r}")
