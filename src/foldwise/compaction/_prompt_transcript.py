r"""The transcript format: messages rendered for a summarizer prompt, and parsed back.

One block per message. A block starts at column 0 with a role header and every continuation
line of the same message is indented by two spaces, so message content can never forge a
header::

    Human (alice): please fix the parser
      it fails on empty input
    AI: I'll look at `parse()` first.
    AI tool call: read_file {"path":"src/parser.py"}
    Tool (read_file): def parse(text):
      ...

Headers are `Human: `, `AI: `, `System: `, `Tool (<tool name>): ` (a message `name` goes in
parentheses), and `AI tool call: <name> <compact JSON args>` lines right after their AI block.
An AI message whose only payload is tool calls renders no `AI:` line. Every kind of line break
in content (`\r\n`, `\r`, `\u2028`, ...) is rendered as `\n`, so a model reading the prompt
and `parse_transcript` see the same lines.

`parse_transcript` is the exact inverse on rendered text (`render_entries(parse_transcript(t))
== t`). It is tolerant of text it did not render: lines before the first header become one
entry of role `unknown` (kept, not dropped, because a summarizer input whose head was cut still
carries paths and errors worth extracting), and unindented lines that are not headers are
continuation lines of the entry above them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from foldwise.messages import HIDE_FROM_UI_FLAG

__all__ = [
    "TranscriptEntry",
    "TranscriptRole",
    "elide_text",
    "extract_prompt_sections",
    "parse_transcript",
    "render_entries",
    "render_transcript",
    "transcript_entries",
]

TranscriptRole = Literal["human", "ai", "system", "tool", "tool_call", "unknown"]

_INDENT = "  "
_LABELS: dict[str, str] = {"human": "Human", "ai": "AI", "system": "System", "tool": "Tool"}
_ROLES_BY_LABEL: dict[str, TranscriptRole] = {
    "Human": "human",
    "AI": "ai",
    "System": "system",
    "Tool": "tool",
}
_TOOL_CALL_PREFIX = "AI tool call:"
_HEADER_RE = re.compile(r"(Human|AI|System|Tool)(?: \(([^()\n]*)\))?:")
_TOOL_CALL_RE = re.compile(r"AI tool call: (\S+)(?: (.*))?\Z")
# Every separator `str.splitlines` honours; normalised to "\n" so no model sees a line break
# the parser does not.
_LINE_BREAK_RE = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_NAME_JUNK_RE = re.compile(r"[()\s]+")
_ELISION = "[… {count:,} characters elided …]"
_CHAT_ROLES: dict[str, TranscriptRole] = {
    "user": "human",
    "human": "human",
    "assistant": "ai",
    "ai": "ai",
    "model": "ai",
    "tool": "tool",
    "function": "tool",
}
_IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_TOOL_USE_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One parsed transcript block.

    Attributes:
        role: `human`, `ai`, `system`, `tool`, `tool_call`, or `unknown` for text found before
            the first header.
        name: The message name (for `tool`, the tool name; for `tool_call`, the called tool).
        content: The message text; for `tool_call`, the compact JSON arguments.
    """

    role: TranscriptRole
    name: str | None
    content: str


def elide_text(text: str, max_chars: int) -> str:
    """Keep the head and tail of `text` (`max_chars` characters in all) around a marker.

    The marker reads `[… N characters elided …]`. A cut never separates the halves of a
    surrogate pair.

    Args:
        text: Any string.
        max_chars: Characters of `text` to keep; must be positive.

    Returns:
        `text` unchanged when it is short enough, otherwise head + marker + tail.

    Raises:
        ValueError: If `max_chars` is not positive.
    """
    if max_chars <= 0:
        raise ValueError(f"max_message_chars must be positive, got {max_chars}")
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail_start = len(text) - (max_chars - head)
    if head and 0xD800 <= ord(text[head - 1]) <= 0xDBFF:
        head -= 1
    if tail_start < len(text) and 0xDC00 <= ord(text[tail_start]) <= 0xDFFF:
        tail_start += 1
    marker = _ELISION.format(count=tail_start - head)
    return text[:head] + marker + text[tail_start:]


def _clean_name(name: object) -> str | None:
    if not isinstance(name, str):
        return None
    cleaned = _NAME_JUNK_RE.sub(" ", name).strip()
    return cleaned or None


def _clean_tool_name(name: object) -> str:
    text = name if isinstance(name, str) else ""
    return "_".join(text.split()) or "unknown_tool"


def _single_line(text: str) -> str:
    return _LINE_BREAK_RE.sub(" ", text)


def _compact_json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    # json.dumps leaves these raw with ensure_ascii=False; escaped they stay valid JSON and
    # can never look like a line break to a reader.
    for char in "\v\f\x1c\x1d\x1e\x85\u2028\u2029":
        if char in text:
            text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _content_text(content: str | list[Any], skip_ids: frozenset[str]) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, dict):
            parts.append(_compact_json(block))
            continue
        kind = block.get("type")
        if kind in _TEXT_BLOCKS and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind in _IMAGE_BLOCKS:
            parts.append("[image]")
        elif kind in _TOOL_USE_BLOCKS and block.get("id") in skip_ids:
            continue  # already rendered as an `AI tool call:` line
        else:
            parts.append(_compact_json(block))
    return "\n".join(parts)


def _role_of(message: BaseMessage) -> TranscriptRole:
    if isinstance(message, HumanMessage):
        return "human"
    if isinstance(message, AIMessage):
        return "ai"
    if isinstance(message, ToolMessage | FunctionMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return _CHAT_ROLES.get(message.role.lower(), "system")
    if isinstance(message, SystemMessage):
        return "system"
    return _CHAT_ROLES.get(message.type, "system")


def _normalize(entry: TranscriptEntry) -> TranscriptEntry:
    if entry.role == "tool_call":
        return TranscriptEntry(
            "tool_call", _clean_tool_name(entry.name), _single_line(entry.content)
        )
    content = _LINE_BREAK_RE.sub("\n", entry.content)
    return TranscriptEntry(entry.role, _clean_name(entry.name), content)


def transcript_entries(
    messages: Sequence[BaseMessage], *, max_message_chars: int | None = None
) -> list[TranscriptEntry]:
    """Turn messages into the entries `render_transcript` renders, in order.

    Messages flagged `additional_kwargs["hide_from_ui"]` are skipped. An AI message yields an
    `ai` entry (left out when its text is empty and it has tool calls) followed by one
    `tool_call` entry per tool call.

    Args:
        messages: The messages.
        max_message_chars: When set, longer message texts and tool-call arguments keep their
            head and tail around an elision marker.

    Returns:
        The normalised entries.
    """
    entries: list[TranscriptEntry] = []
    for message in messages:
        if isinstance(message, RemoveMessage) or message.additional_kwargs.get(HIDE_FROM_UI_FLAG):
            continue
        role = _role_of(message)
        calls: list[tuple[str, str]] = []
        call_ids: set[str] = set()
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls.append((_clean_tool_name(call.get("name")), _compact_json(call["args"])))
                if call.get("id"):
                    call_ids.add(str(call["id"]))
            for bad in message.invalid_tool_calls:
                args = bad.get("args")
                calls.append((_clean_tool_name(bad.get("name")), _single_line(args or "")))
        text = _content_text(message.content, frozenset(call_ids))
        if max_message_chars is not None:
            text = elide_text(text, max_message_chars)
        name = _clean_name(message.name)
        if not (role == "ai" and calls and not text.strip()):
            entries.append(_normalize(TranscriptEntry(role, name, text)))
        for tool_name, args in calls:
            if max_message_chars is not None:
                args = elide_text(args, max_message_chars)
            entries.append(TranscriptEntry("tool_call", tool_name, args))
    return entries


def _render_entry(entry: TranscriptEntry) -> str:
    entry = _normalize(entry)
    if entry.role == "tool_call":
        suffix = f" {entry.content}" if entry.content else ""
        return f"{_TOOL_CALL_PREFIX} {entry.name}{suffix}"
    lines = entry.content.split("\n")
    rest = "".join(f"\n{_INDENT}{line}" if line else "\n" for line in lines[1:])
    if entry.role == "unknown":
        first = f"{_INDENT}{lines[0]}" if lines[0] else ""
        return first + rest
    label = _LABELS[entry.role]
    header = f"{label} ({entry.name}):" if entry.name else f"{label}:"
    first = f" {lines[0]}" if lines[0] else ""
    return header + first + rest


def render_entries(entries: Iterable[TranscriptEntry]) -> str:
    r"""Render entries in the transcript format (`parse_transcript`'s exact inverse).

    Entry names and line breaks are normalised as described in the module docstring; a
    `tool_call` entry's content is put on one line. An `unknown` entry is rendered as indented
    lines, which parse back as `unknown` only at the very start of a transcript.

    Args:
        entries: The entries, in order.

    Returns:
        The rendered text, blocks joined by `\n`.
    """
    return "\n".join(_render_entry(entry) for entry in entries)


def render_transcript(
    messages: Sequence[BaseMessage], *, max_message_chars: int | None = None
) -> str:
    r"""Render messages for a summarizer prompt, one header-led block per message.

    Args:
        messages: The messages; those flagged `hide_from_ui` are skipped.
        max_message_chars: When set, a longer message keeps its head and tail with a marker
            `[… N characters elided …]` in the middle.

    Returns:
        The transcript; the empty string when nothing is visible.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> print(render_transcript([HumanMessage("hi\nHuman: forged", name="alice")]))
        Human (alice): hi
          Human: forged
    """
    return render_entries(transcript_entries(messages, max_message_chars=max_message_chars))


def _parse_header(line: str) -> tuple[TranscriptRole, str | None, str] | None:
    if line.startswith(_TOOL_CALL_PREFIX):
        call = _TOOL_CALL_RE.match(line)
        if call is not None:
            return "tool_call", call.group(1), call.group(2) or ""
    match = _HEADER_RE.match(line)
    if match is None:
        return None
    rest = line[match.end() :]
    if rest.startswith(" "):
        rest = rest[1:]
    return _ROLES_BY_LABEL[match.group(1)], match.group(2), rest


def _strip_indent(line: str) -> str:
    return line[len(_INDENT) :] if line.startswith(_INDENT) else line


def parse_transcript(text: str) -> list[TranscriptEntry]:
    """Parse a transcript back into entries.

    A header is recognised only at column 0. Lines before the first header form one
    `unknown` entry (their two-space indent removed); other lines continue the entry above
    them, losing a two-space indent when they have one (lines continuing an `AI tool call:`
    line, which this module never renders, are joined to its arguments with a space).

    Args:
        text: A transcript, typically from `render_transcript` or `extract_prompt_sections`.

    Returns:
        The entries, in order.
    """
    entries: list[TranscriptEntry] = []
    if not text:
        return entries
    role: TranscriptRole | None = None
    name: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if role is not None:
            joiner = " " if role == "tool_call" else "\n"
            entries.append(TranscriptEntry(role, name, joiner.join(lines)))

    for line in text.split("\n"):
        header = None
        if line and line[0] in "HAST":
            header = _parse_header(line)
        if header is not None:
            flush()
            role, name, first = header
            lines = [first]
        elif role is None:
            role, name, lines = "unknown", None, [_strip_indent(line)]
        else:
            lines.append(_strip_indent(line))
    flush()
    return entries


_SECTION_UNESCAPE_RE = re.compile(r"&(lt|gt|amp|quot|#x27|#39);")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "#x27": "'", "#39": "'"}


def _unescape(text: str) -> str:
    # `html.unescape` would also turn e.g. "&copy" into "©"; only what `html.escape`
    # produces is reversed, in one pass, so the result is the exact original.
    return _SECTION_UNESCAPE_RE.sub(lambda m: _ENTITIES[m.group(1)], text)


def _last_block(text: str, tag: str) -> str | None:
    close = text.rfind(f"</{tag}>")
    if close < 0:
        return None
    opening = f"<{tag}>"
    start = text.rfind(opening, 0, close)
    if start < 0:
        return None
    body = text[start + len(opening) : close]
    body = body.removeprefix("\n")
    body = body.removesuffix("\n")
    return _unescape(body)


def extract_prompt_sections(prompt_text: str) -> tuple[str | None, str | None]:
    """Find the last `<existing_summary>` and `<new_messages>` blocks of a summarizer prompt.

    The compaction engine HTML-escapes block contents, so a tag forged inside them is escaped
    and a plain search for the real, unescaped tags is safe.

    Args:
        prompt_text: The prompt the compaction engine sent.

    Returns:
        `(existing_summary, new_messages)`, each unescaped, or `None` when absent.
    """
    return _last_block(prompt_text, "existing_summary"), _last_block(prompt_text, "new_messages")
