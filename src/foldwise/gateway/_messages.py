"""Run input messages: OpenAI-style or LangChain dicts in, validated LangChain messages out.

Accepted shapes (each a JSON object):

- OpenAI: ``{"role": "user"|"assistant"|"tool", "content": ..., "tool_calls": [{"id", "type":
  "function", "function": {"name", "arguments": "<json>"}}], "tool_call_id": ..., "name": ...}``
- LangChain: ``{"type": "human"|"ai"|"tool", "content": ..., "tool_calls": [{"id", "name",
  "args": {...}}], "tool_call_id": ..., "id": ..., "name": ..., "additional_kwargs": {...}}``
  (what `GET /threads/{id}/state` returns, so a client can send messages back).

Refused with 422 naming the field: system/developer messages (system prompts are configured on
the server; untrusted text never reaches a system message), unknown roles, content that is not
text or content blocks, malformed tool calls, a tool result without a matching call, a tool
call without a result, and text that is not valid Unicode (lone surrogates). foldwise's own
flags (`hide_from_ui`, durable-context, reminder and offload markers) and client-supplied
`usage_metadata` (which would skew token counting) are dropped.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._schemas import check_filter_ints
from foldwise.messages import (
    DURABLE_DATA_FLAG,
    DYNAMIC_REMINDER_FLAG,
    HIDE_FROM_UI_FLAG,
    OFFLOAD_FLAG,
    analyze_tool_pairing,
    is_hidden,
)

__all__ = [
    "INTERRUPTED_TOOL_RESULT",
    "check_new_ids",
    "check_tool_results",
    "check_values",
    "interrupted_results",
    "message_from_record",
    "message_record",
    "parse_input_messages",
    "visible",
]

_ROLES = {
    "user": "human",
    "human": "human",
    "assistant": "ai",
    "ai": "ai",
    "tool": "tool",
}
_REFUSED_ROLES = ("system", "developer")
_RESERVED_FLAGS = frozenset(
    {HIDE_FROM_UI_FLAG, DURABLE_DATA_FLAG, DYNAMIC_REMINDER_FLAG, OFFLOAD_FLAG, "foldwise_clipped"}
)
_MAX_ID = 512

INTERRUPTED_TOOL_RESULT = (
    "The run was interrupted before this tool returned; the tool may or may not have run."
)


def check_values(value: Any, field: str, *, depth: int = 0, nul: bool = True) -> None:
    """Raise `RequestFieldError` for a value that cannot be stored or sent on.

    That is a string that is not encodable as UTF-8 (a lone surrogate such as U+D800 parses as
    JSON but fails later), or a non-finite number (Python's JSON parser accepts `NaN`); with
    `nul=False` also a string holding NUL, which PostgreSQL text and `jsonb` cannot store.
    """
    if depth > 64:
        raise RequestFieldError(field, "nested too deeply")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestFieldError(field, "contains invalid Unicode (a lone surrogate)") from None
        if not nul and "\x00" in value:
            raise RequestFieldError(field, "must not contain NUL characters")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise RequestFieldError(field, "must be a finite number (not NaN or Infinity)")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_values(key, field, depth=depth + 1, nul=nul)
            where = f"{field}.{key}" if field else str(key)
            check_values(item, where, depth=depth + 1, nul=nul)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_values(item, f"{field}[{index}]", depth=depth + 1, nul=nul)


def _content(raw: Any, field: str, *, allow_none: bool) -> str | list[str | dict[str, Any]]:
    if raw is None and allow_none:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        for index, block in enumerate(raw):
            if isinstance(block, str):
                continue
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise RequestFieldError(
                    f"{field}[{index}]", "a content block must be a string or an object with a type"
                )
        return list(raw)
    raise RequestFieldError(field, "must be a string or a list of content blocks")


def _optional_str(raw: Mapping[str, Any], key: str, field: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        raise RequestFieldError(f"{field}.{key}", f"must be a string of 1-{_MAX_ID} characters")
    return value


def _tool_call(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RequestFieldError(field, "a tool call must be an object")
    call_id = _optional_str(raw, "id", field)
    if call_id is None:
        raise RequestFieldError(f"{field}.id", "a tool call needs an id")
    function = raw.get("function")
    if isinstance(function, dict):  # OpenAI shape
        name = function.get("name")
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):
            try:
                args = json.loads(arguments or "{}")
            except ValueError:
                raise RequestFieldError(
                    f"{field}.function.arguments", "must be a JSON object encoded as a string"
                ) from None
        else:
            args = arguments
        where = f"{field}.function"
    else:
        name = raw.get("name")
        args = raw.get("args", {})
        where = field
    if not isinstance(name, str) or not name:
        raise RequestFieldError(f"{where}.name", "a tool call needs a name")
    if not isinstance(args, dict):
        raise RequestFieldError(f"{where}.args", "tool call arguments must be an object")
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _extra_kwargs(raw: Mapping[str, Any], field: str) -> dict[str, Any]:
    extra = raw.get("additional_kwargs")
    if extra is None:
        return {}
    if not isinstance(extra, dict):
        raise RequestFieldError(f"{field}.additional_kwargs", "must be an object")
    # foldwise's flags decide what is hidden, rescued or rendered as data: never from a client.
    return {k: v for k, v in extra.items() if k not in _RESERVED_FLAGS and k != "tool_calls"}


def _one(raw: Any, field: str) -> BaseMessage:
    if not isinstance(raw, dict):
        raise RequestFieldError(field, "a message must be an object")
    # Anything in a message is checkpointed (msgpack): an integer past 64 bits cannot be.
    check_filter_ints(raw, field)
    role_key = "role" if "role" in raw else "type"
    role = raw.get(role_key)
    if not isinstance(role, str):
        raise RequestFieldError(f"{field}.role", "missing: use role user, assistant or tool")
    if role in _REFUSED_ROLES:
        raise RequestFieldError(
            f"{field}.{role_key}",
            f"{role} messages are not accepted as input; the system prompt is configured on "
            "the server",
        )
    kind = _ROLES.get(role)
    if kind is None:
        raise RequestFieldError(
            f"{field}.{role_key}", f"unknown role {role!r}: use user, assistant or tool"
        )
    check_values(raw, field)
    message_id = _optional_str(raw, "id", field)
    name = _optional_str(raw, "name", field)
    extra = _extra_kwargs(raw, field)
    if kind == "human":
        if "content" not in raw:
            raise RequestFieldError(f"{field}.content", "missing")
        content = _content(raw.get("content"), f"{field}.content", allow_none=False)
        return HumanMessage(content=content, id=message_id, name=name, additional_kwargs=extra)
    if kind == "ai":
        calls_raw = raw.get("tool_calls") or []
        if not isinstance(calls_raw, list):
            raise RequestFieldError(f"{field}.tool_calls", "must be a list")
        calls = [_tool_call(c, f"{field}.tool_calls[{i}]") for i, c in enumerate(calls_raw)]
        content = _content(raw.get("content"), f"{field}.content", allow_none=True)
        return AIMessage(
            content=content, id=message_id, name=name, tool_calls=calls, additional_kwargs=extra
        )
    call_id = _optional_str(raw, "tool_call_id", field)
    if call_id is None:
        raise RequestFieldError(f"{field}.tool_call_id", "a tool message needs a tool_call_id")
    status = raw.get("status", "success")
    if status not in ("success", "error"):
        raise RequestFieldError(f"{field}.status", "must be success or error")
    content = _content(raw.get("content"), f"{field}.content", allow_none=False)
    return ToolMessage(
        content=content,
        tool_call_id=call_id,
        id=message_id,
        name=name,
        status=status,
        additional_kwargs=extra,
    )


def parse_input_messages(raw: Any, *, field: str = "input.messages") -> list[BaseMessage]:
    """Validate and convert run input messages; give each an id.

    Tool results are checked against their calls separately (`check_tool_results`), once the
    thread's pending calls are known.

    Args:
        raw: The `input.messages` value of the request.
        field: Dotted path of `raw`, for error messages.

    Returns:
        LangChain messages with ids (fresh UUIDs where the client gave none).

    Raises:
        RequestFieldError: Naming the first invalid field.
    """
    if not isinstance(raw, list) or not raw:
        raise RequestFieldError(field, "must be a non-empty list of messages")
    messages = [_one(item, f"{field}[{index}]") for index, item in enumerate(raw)]
    seen: set[str] = set()
    for index, message in enumerate(messages):
        if message.id is None:
            message.id = str(uuid.uuid4())
        elif message.id in seen:
            raise RequestFieldError(f"{field}[{index}].id", f"duplicate id {message.id!r}")
        seen.add(str(message.id))
    return messages


def check_tool_results(
    messages: Sequence[BaseMessage],
    pending_call_ids: Iterable[str] = (),
    *,
    field: str = "input.messages",
) -> None:
    """Check that every input tool result answers a call, and every input call is answered.

    Args:
        messages: The parsed input messages.
        pending_call_ids: Tool calls of the thread still waiting for a result.
        field: Dotted path of the input messages, for error messages.

    Raises:
        RequestFieldError: A tool result without a call, or a tool call without a result.
    """
    pending = set(pending_call_ids)
    pairing = analyze_tool_pairing(messages)
    for index in pairing.orphan_results:
        tool = messages[index]
        assert isinstance(tool, ToolMessage)
        if tool.tool_call_id not in pending:
            raise RequestFieldError(
                f"{field}[{index}].tool_call_id",
                f"no tool call {tool.tool_call_id!r} precedes this tool result",
            )
        pending.discard(tool.tool_call_id)
    if pairing.pending_calls:
        index, call_id = pairing.pending_calls[0]
        raise RequestFieldError(
            f"{field}[{index}].tool_calls",
            f"tool call {call_id!r} has no result in the input; send its tool message after it",
        )


def interrupted_results(
    history: Sequence[BaseMessage], answered: Iterable[BaseMessage] = ()
) -> list[ToolMessage]:
    """Error results for tool calls of `history` that have no result (an interrupted run).

    Without them the next request would carry a tool call without its result, which every
    provider rejects. Calls answered by a tool message in `answered` are left alone.
    """
    done = {m.tool_call_id for m in answered if isinstance(m, ToolMessage)}
    names = {
        str(call.get("id")): str(call.get("name") or "")
        for m in history
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    }
    return [
        ToolMessage(
            content=INTERRUPTED_TOOL_RESULT,
            tool_call_id=call_id,
            name=names.get(call_id) or None,
            status="error",
            id=str(uuid.uuid4()),
        )
        for _index, call_id in analyze_tool_pairing(history).pending_calls
        if call_id not in done
    ]


def visible(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages a user sees (no hidden framework messages, no removals)."""
    return [m for m in messages if not is_hidden(m) and m.type != "remove"]


def message_record(message: BaseMessage) -> dict[str, Any]:
    """The stored form of a transcript message (LangChain's `message_to_dict`)."""
    return message_to_dict(message)


def message_from_record(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The wire form (`model_dump()`, as in thread state) of a stored transcript message."""
    try:
        message = messages_from_dict([dict(record)])[0]
    except (KeyError, TypeError, ValueError):
        return None
    return message.model_dump()


def check_new_ids(
    messages: Sequence[BaseMessage], history: Sequence[BaseMessage], field: str = "input.messages"
) -> None:
    """Refuse input ids already in the thread.

    LangGraph would overwrite that message in place (an AI tool call replaced by text would
    orphan its results), and the transcript keeps only the first message of an id.
    """
    existing = {str(m.id) for m in history if m.id is not None}
    for index, message in enumerate(messages):
        if str(message.id) in existing:
            raise RequestFieldError(
                f"{field}[{index}].id",
                f"a message with id {message.id!r} is already in the thread; new messages need "
                "new ids (or none)",
            )
