"""Durable channels: what each one stores, how it is captured, merged and rendered."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from foldwise.durable._delegations import render_delegations
from foldwise.durable._render import (
    SUMMARY_HEADING,
    SUMMARY_RENDER_CAP_CHARS,
    bound_text,
    render_section,
    render_summary_section,
)
from foldwise.durable._skills import SKILL_METADATA_KEY, render_skills
from foldwise.messages import OFFLOAD_FLAG

__all__ = [
    "BUILTIN_CHANNELS",
    "MEMORY_RENDER_BUDGET",
    "OFFLOAD_RENDER_BUDGET",
    "DurableChannel",
    "delegations_gone",
    "escape_value",
    "offloads_gone",
    "render_memory_context",
    "render_offloads",
    "render_sections",
    "skills_gone",
]

OFFLOAD_RENDER_BUDGET = 3000
MEMORY_RENDER_BUDGET = 200_000
"""Memory bounds its own section in tokens (`memory.injection.max_tokens`); this is a backstop."""

Capture = Callable[[Sequence[BaseMessage], Mapping[str, Any]], Any]
"""`capture(messages, state)` returns the channel update to write, or `None` for no change."""


def escape_value(value: object) -> str:
    """Escape `<`, `>` and `&` in `value`.

    Not needed in a channel's `render`: the framework escapes every rendered section, and text
    already escaped with this function is not escaped twice.
    """
    return html.escape(str(value), quote=False)


@dataclass(frozen=True)
class DurableChannel:
    """One durable channel: a state key, how it is rendered, and optionally captured.

    Applications register their own (for example pinned user constraints) by passing them to
    `DurableContextMiddleware(channels=[...])`; the middleware adds the state key with the given
    reducer, runs `capture` before every model call (before summarization, so nothing is
    compacted first), and renders the value inside the data block.

    Attributes:
        key: The state key.
        render: Returns the section text for a value, as plain text; an empty string renders
            nothing. The framework escapes it and places it, indented, in its own
            `<section channel="key">` element, so nothing it returns can pose as another
            section or close the data block.
        budget_chars: The section is cut to this many characters (head and tail kept).
        reducer: LangGraph reducer for the key (`None`: last write wins).
        capture: Extracts an update from the current messages and state.
        default: The type annotation of the value (for the state schema).
        gone_from_context: Given the value and the current messages, returns the part the
            messages no longer show (`None`: render the whole value). Rendering only what
            compaction removed keeps the block unchanged between compactions, so the request
            prefix stays cacheable by the provider.
    """

    key: str
    render: Callable[[Any], str]
    budget_chars: int = 6000
    reducer: Callable[[Any, Any], Any] | None = None
    capture: Capture | None = None
    default: Any = list
    gone_from_context: Callable[[Any, Sequence[BaseMessage]], Any] | None = None


def render_offloads(entries: Sequence[Mapping[str, Any]]) -> str:
    """References to stored artifacts so the model knows they exist after compaction."""
    if not entries:
        return ""
    lines = [
        "## Stored artifacts (full text kept outside the context; read with "
        "read_offloaded(artifact_id, offset) or search_offloaded(artifact_id, pattern))"
    ]
    for entry in reversed(entries):
        preview = " ".join(str(entry.get("preview") or "").split())[:120]
        origin = (
            "messages removed by a compaction (verbatim transcript; search it for details the "
            "summary left out)"
            if entry.get("kind") == "archive"
            else f"from {entry.get('source')}"
        )
        line = (
            f"- {entry.get('artifact_id')}: {origin}, "
            f"{int(entry.get('chars') or 0):,} chars (~{int(entry.get('tokens') or 0):,} tokens)"
        )
        if preview:
            line += f": {preview}"
        lines.append(line)
    return "\n".join(lines)


def render_memory_context(value: Mapping[str, Any] | None) -> str:
    """The long-term memory section (profile and recall), rendered by `MemoryMiddleware`."""
    return str((value or {}).get("text") or "")


def _call_ids(messages: Sequence[BaseMessage]) -> set[str]:
    return {
        str(call.get("id")) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls
    }


def delegations_gone(
    entries: Sequence[Mapping[str, Any]], messages: Sequence[BaseMessage]
) -> list[Any]:
    """Ledger entries whose `task` call is no longer in the messages."""
    present = _call_ids(messages)
    return [e for e in entries if str(e.get("id")) not in present]


def skills_gone(entries: Sequence[Mapping[str, Any]], messages: Sequence[BaseMessage]) -> list[Any]:
    """Skill references whose read result is no longer in the messages."""
    present = {
        str(meta.get("path"))
        for m in messages
        if isinstance(m, ToolMessage)
        and isinstance(meta := m.additional_kwargs.get(SKILL_METADATA_KEY), dict)
    }
    return [e for e in entries if str(e.get("path")) not in present]


def offloads_gone(
    entries: Sequence[Mapping[str, Any]], messages: Sequence[BaseMessage]
) -> list[Any]:
    """Artifact references whose preview message is no longer in the messages."""
    present = {
        str(ref.get("artifact_id"))
        for m in messages
        if isinstance(ref := m.additional_kwargs.get(OFFLOAD_FLAG), dict)
    }
    return [e for e in entries if str(e.get("artifact_id")) not in present]


BUILTIN_CHANNELS: tuple[DurableChannel, ...] = (
    # The summary is never cut here: it is written within its size target, and
    # `summary_for_context` bounds older ones the same way for the renderer and the counters.
    DurableChannel(
        "summary_text",
        render_summary_section,
        SUMMARY_RENDER_CAP_CHARS + len(SUMMARY_HEADING) + 1,
    ),
    DurableChannel("delegations", render_delegations, 6000, gone_from_context=delegations_gone),
    DurableChannel("skill_context", render_skills, 6000, gone_from_context=skills_gone),
    DurableChannel(
        "offloads", render_offloads, OFFLOAD_RENDER_BUDGET, gone_from_context=offloads_gone
    ),
    # Last, so a change in the request-dependent recall leaves the sections above it (and the
    # memory profile, which precedes recall) in the cacheable prefix.
    DurableChannel("memory_context", render_memory_context, MEMORY_RENDER_BUDGET, default=dict),
)


def render_sections(
    state: Mapping[str, Any], channels: Sequence[DurableChannel] = BUILTIN_CHANNELS
) -> list[str]:
    """Render every channel with a value, in order, each within its budget, as section elements.

    Each channel's text is cut to its budget, then escaped and indented inside its own
    `<section channel="key">` element (`render_section`). Channels with a `gone_from_context`
    filter render only what the state's messages no longer show, so the block changes only
    when compaction removes something.
    """
    sections: list[str] = []
    if not isinstance(state, Mapping):
        return sections
    messages: Sequence[BaseMessage] = state.get("messages") or []
    for channel in channels:
        value = state.get(channel.key)
        if value and channel.gone_from_context is not None:
            value = channel.gone_from_context(value, messages)
        if not value:
            continue
        text = channel.render(value)
        if text and text.strip():
            sections.append(render_section(channel.key, bound_text(text, channel.budget_chars)))
    return sections
