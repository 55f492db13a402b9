"""Convert decoded trace values (OpenAI, Anthropic, LangChain dicts) into LangChain messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)

from foldwise.errors import TraceFormatError

if TYPE_CHECKING:
    from foldwise.replay._trace import Document, RawItem

__all__ = ["convert_document"]

_LC_TYPES = frozenset({"human", "ai", "system", "tool", "chat", "function", "AIMessageChunk"})
Converted = tuple[list[BaseMessage], list[int], list[dict[str, Any]], list[str]]


def _err(message: str, item: RawItem, key: str | None = None) -> TraceFormatError:
    path = ".".join(p for p in (item.field, key) if p)
    return TraceFormatError(message, line=item.line, field=path or None)


def _object(item: RawItem) -> dict[str, Any]:
    if not isinstance(item.value, dict):
        raise _err(f"expected a message object, got {type(item.value).__name__}", item)
    return item.value


def _content(value: Any, item: RawItem, key: str = "content") -> str | list[str | dict[str, Any]]:
    """Validate an OpenAI/LangChain-style content: a string, null, or a list of parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _err(f"content must be a string or a list, got {type(value).__name__}", item, key)
    parts: list[str | dict[str, Any]] = []
    for index, part in enumerate(value):
        where = f"{key}[{index}]"
        if isinstance(part, str):
            parts.append(part)
            continue
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _err("each content part must be an object with a 'type'", item, where)
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise _err("text part without a string 'text'", item, f"{where}.text")
        parts.append(part)
    return parts


def _tool_schema(value: Any, item: RawItem, key: str) -> dict[str, Any]:
    """An OpenAI function tool from an OpenAI or Anthropic tool definition."""
    if not isinstance(value, dict):
        raise _err("tool definitions must be objects", item, key)
    function = value.get("function") if value.get("type") == "function" else value
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise _err("tool definition without a name", item, f"{key}.name")
    parameters = function.get("parameters", function.get("input_schema"))
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise _err("tool parameters must be a JSON schema object", item, f"{key}.parameters")
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": str(function.get("description") or ""),
            "parameters": parameters,
        },
    }


def _container_item(document: Document) -> RawItem:
    from foldwise.replay._trace import RawItem

    return RawItem(document.container, document.container_line)


def _tools_of(container: dict[str, Any] | None, item: RawItem) -> list[dict[str, Any]]:
    if not container:
        return []
    raw = container.get("tools", container.get("functions"))
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _err("'tools' must be a list", item, "tools")
    return [_tool_schema(t, item, f"tools[{i}]") for i, t in enumerate(raw)]


# -- OpenAI chat completions --------------------------------------------------------------


def _openai_calls(value: Any, item: RawItem) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _err("tool_calls must be a list", item, "tool_calls")
    calls: list[dict[str, Any]] = []
    for index, call in enumerate(value):
        where = f"tool_calls[{index}]"
        if not isinstance(call, dict):
            raise _err("each tool call must be an object", item, where)
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise _err("tool call without an id", item, f"{where}.id")
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _err("tool call without function.name", item, f"{where}.function.name")
        args = function.get("arguments", "{}")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as err:
                raise _err(
                    f"arguments are not valid JSON ({err.msg})", item, f"{where}.function.arguments"
                ) from None
        if not isinstance(args, dict):
            raise _err("arguments must be a JSON object", item, f"{where}.function.arguments")
        calls.append({"name": function["name"], "args": args, "id": call["id"]})
    return calls


def _openai_message(item: RawItem, legacy: dict[str, list[str]], counter: list[int]) -> BaseMessage:
    value = _object(item)
    role = value.get("role")
    if not isinstance(role, str):
        raise _err("message without a role", item, "role")
    name = value.get("name") if isinstance(value.get("name"), str) else None
    content = _content(value.get("content"), item)
    if role in ("system", "developer"):
        return SystemMessage(content=content)
    if role == "user":
        return HumanMessage(content=content, name=name)
    if role == "assistant":
        calls = _openai_calls(value.get("tool_calls"), item)
        function_call = value.get("function_call")
        if isinstance(function_call, dict) and isinstance(function_call.get("name"), str):
            counter[0] += 1
            call_id = f"function-call-{counter[0]}"
            legacy.setdefault(function_call["name"], []).append(call_id)
            fake = {"id": call_id, "function": function_call}
            calls.extend(_openai_calls([fake], item))
        return AIMessage(content=content, tool_calls=calls, name=name)
    if role == "tool":
        result_id = value.get("tool_call_id")
        if not isinstance(result_id, str) or not result_id:
            raise _err("tool message without a tool_call_id", item, "tool_call_id")
        return ToolMessage(content=content, tool_call_id=result_id, name=name)
    if role == "function":
        pending = legacy.get(name or "", [])
        if not pending:
            raise _err("function result without a preceding function_call", item, "name")
        return ToolMessage(content=content, tool_call_id=pending.pop(0), name=name)
    raise _err(
        f"unknown role {role!r} (expected system, developer, user, assistant or tool)",
        item,
        "role",
    )


def _response_item(document: Document) -> RawItem | None:
    """The logged answer to the request (`response` or `choices[0].message`), if any."""
    from foldwise.replay._trace import RawItem

    container = document.container or {}
    response = container.get("response")
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        container = response
        response = None
    if response is None and isinstance(container.get("choices"), list) and container["choices"]:
        choice = container["choices"][0]
        response = choice.get("message") if isinstance(choice, dict) else None
        field = "choices[0].message"
    else:
        field = "response"
    if not isinstance(response, dict):
        return None
    return RawItem(response, document.container_line, field)


def _convert_openai(document: Document) -> Converted:
    legacy: dict[str, list[str]] = {}
    counter = [0]
    messages: list[BaseMessage] = []
    lines: list[int] = []
    items = list(document.items)
    response = _response_item(document)
    if response is not None:
        items.append(response)
    for item in items:
        messages.append(_openai_message(item, legacy, counter))
        lines.append(item.line)
    return messages, lines, _tools_of(document.container, _container_item(document)), []


# -- Anthropic Messages -------------------------------------------------------------------


def _result_content(value: Any, item: RawItem, key: str) -> str | list[str | dict[str, Any]]:
    if isinstance(value, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in value
    ):
        return "\n".join(str(b.get("text", "")) for b in value)
    return _content(value, item, key)


def _anthropic_user(value: dict[str, Any], item: RawItem) -> list[BaseMessage]:
    content = value.get("content")
    if isinstance(content, str):
        return [HumanMessage(content=content)]
    if not isinstance(content, list):
        raise _err("content must be a string or a list of blocks", item, "content")
    out: list[BaseMessage] = []
    rest: list[str | dict[str, Any]] = []
    for index, block in enumerate(content):
        where = f"content[{index}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _err("each content block must be an object with a 'type'", item, where)
        if block["type"] == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise _err("tool_result without a tool_use_id", item, f"{where}.tool_use_id")
            text = _result_content(block.get("content"), item, f"{where}.content")
            status = "error" if block.get("is_error") else "success"
            out.append(ToolMessage(content=text, tool_call_id=call_id, status=status))
        elif block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise _err("text block without a string 'text'", item, f"{where}.text")
            rest.append({"type": "text", "text": block["text"]})
        else:
            rest.append(block)
    if rest:
        if all(isinstance(b, dict) and b.get("type") == "text" for b in rest):
            out.append(HumanMessage(content="\n".join(str(b["text"]) for b in rest)))  # type: ignore[index]
        else:
            out.append(HumanMessage(content=rest))
    return out


def _anthropic_assistant(value: dict[str, Any], item: RawItem, warnings: list[str]) -> AIMessage:
    content = value.get("content")
    if isinstance(content, str):
        return AIMessage(content=content)
    if not isinstance(content, list):
        raise _err("content must be a string or a list of blocks", item, "content")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        where = f"content[{index}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _err("each content block must be an object with a 'type'", item, where)
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _err("text block without a string 'text'", item, f"{where}.text")
            texts.append(block["text"])
        elif kind in ("tool_use", "server_tool_use"):
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise _err("tool_use without an id", item, f"{where}.id")
            if not isinstance(block.get("name"), str):
                raise _err("tool_use without a name", item, f"{where}.name")
            args = block.get("input", {})
            if not isinstance(args, dict):
                raise _err("tool_use input must be an object", item, f"{where}.input")
            calls.append({"name": block["name"], "args": args, "id": block["id"]})
        elif kind in ("thinking", "redacted_thinking"):
            if not warnings or "thinking" not in warnings[-1]:
                warnings.append(
                    "thinking blocks were dropped (the API strips them from earlier turns)"
                )
        else:
            texts.append(json.dumps(block, ensure_ascii=False))
    return AIMessage(content="\n".join(texts), tool_calls=calls)


def _convert_anthropic(document: Document) -> Converted:
    messages: list[BaseMessage] = []
    lines: list[int] = []
    warnings: list[str] = []
    container = document.container or {}
    system = container.get("system")
    if system:
        if isinstance(system, list):
            system = "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        messages.append(SystemMessage(content=str(system)))
        lines.append(document.container_line)
    items = list(document.items)
    response = _response_item(document)
    if response is not None:
        items.append(response)
    for item in items:
        value = _object(item)
        role = value.get("role")
        if role == "user":
            converted: list[BaseMessage] = _anthropic_user(value, item)
        elif role == "assistant":
            converted = [_anthropic_assistant(value, item, warnings)]
        elif role == "system":
            converted = [SystemMessage(content=_content(value.get("content"), item))]
        elif role is None:
            raise _err("message without a role", item, "role")
        else:
            raise _err(f"unknown role {role!r} (expected user or assistant)", item, "role")
        messages.extend(converted)
        lines.extend([item.line] * len(converted))
    return messages, lines, _tools_of(container, _container_item(document)), warnings


# -- LangChain message dicts ----------------------------------------------------------------


def _convert_langchain(document: Document) -> Converted:
    messages: list[BaseMessage] = []
    lines: list[int] = []
    for item in document.items:
        value = _object(item)
        kind = value.get("type")
        if not isinstance(kind, str) or kind not in _LC_TYPES:
            raise _err(f"unknown LangChain message type {kind!r}", item, "type")
        data = value.get("data")
        if not isinstance(data, dict):
            raise _err("message dict without a 'data' object", item, "data")
        if "content" not in data:
            raise _err("message data without 'content'", item, "data.content")
        if kind == "tool" and not data.get("tool_call_id"):
            raise _err("tool message without a tool_call_id", item, "data.tool_call_id")
        try:
            message = messages_from_dict([value])[0]
        except (KeyError, TypeError, ValueError) as err:
            raise _err(f"cannot build a {kind} message: {err}", item, "data") from None
        if isinstance(message, AIMessage):
            for index, call in enumerate(message.tool_calls):
                if not call.get("id"):
                    raise _err("tool call without an id", item, f"data.tool_calls[{index}].id")
        messages.append(message)
        lines.append(item.line)
    return messages, lines, _tools_of(document.container, _container_item(document)), []


def convert_document(document: Document, format: str) -> Converted:
    """Messages, their lines, tool schemas and warnings of a decoded trace."""
    if format == "openai":
        return _convert_openai(document)
    if format == "anthropic":
        return _convert_anthropic(document)
    if format == "langchain":
        return _convert_langchain(document)
    raise TraceFormatError(f"unknown trace format {format!r}", field="format")
