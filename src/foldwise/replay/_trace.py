"""`Trace`: a recorded session as LangChain messages, and `load_trace` with format detection.

Supported inputs (`format="auto"` detects them):

- `openai`: chat-completions messages, as a JSON array, a JSON object `{"messages": [...]}`,
  JSONL with one message per line, or JSONL with one request `{"messages": [...]}` per line
  (the longest request, the last one on a tie, is the session; its `response` or
  `choices[0].message`, when logged, is appended).
- `anthropic`: Messages API conversations (content blocks, `tool_use` / `tool_result`), in the
  same containers; a request object may carry `system` and `tools`.
- `langchain`: `langchain_core.messages.messages_to_dict` output, as a JSON array or JSONL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from foldwise.errors import TraceFormatError

__all__ = ["TRACE_FORMATS", "RawItem", "Trace", "TraceFormat", "load_trace", "parse_trace"]

TraceFormat = Literal["auto", "openai", "anthropic", "langchain"]
TRACE_FORMATS: tuple[str, ...] = ("auto", "openai", "anthropic", "langchain")
"""Accepted values of the `format` argument."""

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_OPENAI_ONLY_ROLES = frozenset({"system", "developer", "tool", "function"})


@dataclass(frozen=True)
class RawItem:
    """One JSON value of a trace file and where it came from.

    Attributes:
        value: The decoded JSON value.
        line: 1-based line where the value starts.
        field: Dotted path of the value inside its line's document (`""` for the whole line).
    """

    value: Any
    line: int
    field: str = ""


@dataclass(frozen=True)
class Trace:
    """A recorded session, ready to replay.

    Attributes:
        messages: The conversation, oldest first; every message has an id.
        tools: Tool schemas in OpenAI function format, when the trace defines them.
        format: The format it was read from.
        source: File name, or `"<messages>"` for in-memory input.
        name: A short label for reports (file stem by default).
        warnings: Oddities tolerated while reading (dropped thinking blocks...).
    """

    messages: tuple[BaseMessage, ...]
    tools: tuple[dict[str, Any], ...] = ()
    format: str = "langchain"
    source: str = "<messages>"
    name: str = "trace"
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def system_prompt(self) -> str | None:
        """The leading system messages joined, if any."""
        parts: list[str] = []
        for message in self.messages:
            if not isinstance(message, SystemMessage):
                break
            parts.append(message.text)
        return "\n\n".join(parts) if parts else None

    @property
    def model_calls(self) -> int:
        """How many times the recorded assistant was called (its messages)."""
        return sum(isinstance(m, AIMessage) for m in self.messages)

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[dict[str, Any]] = (),
        name: str = "trace",
    ) -> Trace:
        """Wrap in-memory messages (ids are assigned where missing, copies are made)."""
        copies = [m.model_copy(deep=True) for m in messages]
        assign_ids(copies)
        check_replayable(copies, line_of=None)
        return cls(tuple(copies), tuple(tools), "langchain", "<messages>", name)


def assign_ids(messages: list[BaseMessage]) -> None:
    """Give every message a unique id (`trace-00001`...), keeping unique ids already there."""
    seen: set[str] = set()
    for index, message in enumerate(messages, start=1):
        if message.id and message.id not in seen:
            seen.add(message.id)
            continue
        candidate = f"trace-{index:05d}"
        while candidate in seen:
            candidate += "x"
        message.id = candidate
        seen.add(candidate)


def check_replayable(messages: Sequence[BaseMessage], *, line_of: Sequence[int] | None) -> None:
    """Raise `TraceFormatError` unless the trace has an assistant message to replay."""
    if not messages:
        raise TraceFormatError("the trace holds no messages")
    if not any(isinstance(m, AIMessage) for m in messages):
        line = line_of[-1] if line_of else None
        raise TraceFormatError(
            "the trace has no assistant message, so there is no model call to replay",
            line=line,
            field="role",
        )
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage) and not message.tool_call_id:
            line = line_of[index] if line_of else None
            raise TraceFormatError("tool message without a tool_call_id", line=line)


# -- reading JSON with line numbers -------------------------------------------------------

_WS = re.compile(r"[ \t\r\n]*")


def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _decode_error(err: json.JSONDecodeError, *, line: int | None = None) -> TraceFormatError:
    where = line if line is not None else err.lineno
    return TraceFormatError(f"invalid JSON: {err.msg} (column {err.colno})", line=where)


def _array_items(text: str, start: int, base_field: str) -> Iterator[RawItem]:
    """Decode the JSON array whose `[` is at `start`, yielding each element with its line."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text, start + 1).end()  # type: ignore[union-attr]
    index = 0
    if pos < len(text) and text[pos] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise _decode_error(err) from None
        yield RawItem(value, _line_at(text, pos), f"{base_field}[{index}]".lstrip("."))
        index += 1
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
        if pos >= len(text):
            raise TraceFormatError("unterminated JSON array", line=_line_at(text, pos))
        if text[pos] == "]":
            return
        if text[pos] != ",":
            raise TraceFormatError(
                f"expected ',' or ']' in the JSON array, found {text[pos]!r}",
                line=_line_at(text, pos),
            )
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


def _messages_array_offset(text: str) -> int | None:
    """Offset of the `[` of the top-level `"messages"` key of a JSON object, if found."""
    depth = 0
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            if depth == 1 and text.startswith('"messages"', index):
                match = re.compile(r'"messages"\s*:\s*\[').match(text, index)
                if match:
                    return match.end() - 1
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return None


@dataclass(frozen=True)
class Document:
    """A trace file decoded into candidate conversations.

    Attributes:
        items: The chosen conversation's message values, with their lines.
        container: The object holding `messages` (for `system`, `tools`, `response`), if any.
        container_line: Line of that object.
    """

    items: list[RawItem]
    container: dict[str, Any] | None = None
    container_line: int = 1


def _document_from_json(text: str) -> Document:
    stripped = text.lstrip()
    offset = len(text) - len(stripped)
    if stripped.startswith("["):
        return Document(list(_array_items(text, offset, "")))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise _decode_error(err) from None
    if not isinstance(value, dict):
        raise TraceFormatError(
            f"expected a JSON array or object, got {type(value).__name__}", line=1
        )
    if "messages" not in value:
        # A single message object is a one-message conversation.
        return Document([RawItem(value, _line_at(text, offset))])
    if not isinstance(value["messages"], list):
        raise TraceFormatError("'messages' must be a list", line=1, field="messages")
    start = _messages_array_offset(text)
    if start is None:
        items = [RawItem(v, 1, f"messages[{i}]") for i, v in enumerate(value["messages"])]
    else:
        items = list(_array_items(text, start, "messages"))
    return Document(items, value, _line_at(text, offset))


def _document_from_jsonl(lines: list[tuple[int, str]]) -> Document:
    values: list[RawItem] = []
    for number, line in lines:
        try:
            values.append(RawItem(json.loads(line), number))
        except json.JSONDecodeError as err:
            raise _decode_error(err, line=number) from None
    requests = [v for v in values if isinstance(v.value, dict) and "messages" in v.value]
    if not requests:
        for item in values:
            if not isinstance(item.value, dict):
                raise TraceFormatError(
                    f"expected a JSON object per line, got {type(item.value).__name__}",
                    line=item.line,
                )
        return Document(values)
    if len(requests) != len(values):
        odd = next(v for v in values if v not in requests)
        raise TraceFormatError(
            "mixes request lines ({'messages': [...]}) with message lines",
            line=odd.line,
            field="messages",
        )
    best = requests[0]
    for request in requests:
        messages = request.value["messages"]
        if not isinstance(messages, list):
            raise TraceFormatError("'messages' must be a list", line=request.line, field="messages")
        if len(messages) >= len(best.value["messages"]):
            best = request
    items = [RawItem(v, best.line, f"messages[{i}]") for i, v in enumerate(best.value["messages"])]
    return Document(items, best.value, best.line)


def read_document(text: str) -> Document:
    """Decode a trace file's text: JSON (array or object) or JSONL."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise TraceFormatError("the trace file is empty")
    first = lines[0][1].lstrip()
    if len(lines) > 1 and first.startswith("{"):
        try:
            json.loads(lines[0][1])
        except json.JSONDecodeError:
            return _document_from_json(text)  # a pretty-printed object
        return _document_from_jsonl(lines)
    return _document_from_json(text)


# -- format detection ---------------------------------------------------------------------


def _blocks(value: Any) -> list[dict[str, Any]]:
    content = value.get("content") if isinstance(value, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def detect_format(document: Document) -> str:
    """Guess `openai`, `anthropic` or `langchain` from the decoded values."""
    values = [item.value for item in document.items if isinstance(item.value, dict)]
    if values and all("type" in v and "data" in v and "role" not in v for v in values):
        return "langchain"
    container = document.container or {}
    if isinstance(container.get("system"), str | list) and "role" not in container:
        return "anthropic"
    for value in values:
        if value.get("role") in _OPENAI_ONLY_ROLES or "tool_calls" in value:
            return "openai"
        if any(b.get("type") in _ANTHROPIC_BLOCKS for b in _blocks(value)):
            return "anthropic"
    return "openai"


def parse_trace(
    text: str, *, format: TraceFormat = "auto", source: str = "<text>", name: str | None = None
) -> Trace:
    """Parse a trace from its text.

    Args:
        text: The file's content.
        format: `auto` (detect), `openai`, `anthropic` or `langchain`.
        source: Where the text came from, for messages.
        name: Report label (default: derived from `source`).

    Raises:
        TraceFormatError: The text is not a readable trace; names the line and field.
    """
    from foldwise.replay._formats import convert_document

    if format not in TRACE_FORMATS:
        raise TraceFormatError(
            f"unknown trace format {format!r}; use one of {', '.join(TRACE_FORMATS)}",
            field="format",
        )
    document = read_document(text)
    chosen = detect_format(document) if format == "auto" else format
    messages, lines, tools, warnings = convert_document(document, chosen)
    assign_ids(messages)
    check_replayable(messages, line_of=lines)
    label = name or ("trace" if source.startswith("<") else Path(source).stem)
    return Trace(tuple(messages), tuple(tools), chosen, source, label, tuple(warnings))


def load_trace(path: str | Path, *, format: TraceFormat = "auto") -> Trace:
    """Read a trace file (JSON or JSONL) in any supported format.

    Raises:
        TraceFormatError: The file is not a readable trace; names the line and field.
        OSError: The file cannot be read.
    """
    file = Path(path)
    try:
        text = file.read_text("utf-8")
    except UnicodeDecodeError as err:
        raise TraceFormatError(f"{file}: not UTF-8 text ({err.reason})") from None
    return parse_trace(text, format=format, source=str(file), name=file.stem)
