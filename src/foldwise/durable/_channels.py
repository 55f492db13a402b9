"""Durable channels: what each one stores, how it is captured, merged and rendered."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise.durable._delegations import render_delegations
from foldwise.durable._render import SUMMARY_CHAR_BUDGET, bound_text, render_summary_section
from foldwise.durable._skills import render_skills

__all__ = [
    "BUILTIN_CHANNELS",
    "OFFLOAD_RENDER_BUDGET",
    "DurableChannel",
    "escape_value",
    "render_offloads",
    "render_sections",
]

OFFLOAD_RENDER_BUDGET = 3000

Capture = Callable[[Sequence[BaseMessage], Mapping[str, Any]], Any]
"""`capture(messages, state)` returns the channel update to write, or `None` for no change."""


def escape_value(value: object) -> str:
    """Escape untrusted text for the data block (`<`, `>` and `&`)."""
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
        render: Returns the section text for a value, already escaped (use `escape_value`);
            an empty string renders nothing.
        budget_chars: The section is cut to this many characters (head and tail kept).
        reducer: LangGraph reducer for the key (`None`: last write wins).
        capture: Extracts an update from the current messages and state.
        default: The type annotation of the value (for the state schema).
    """

    key: str
    render: Callable[[Any], str]
    budget_chars: int = 6000
    reducer: Callable[[Any, Any], Any] | None = None
    capture: Capture | None = None
    default: Any = list


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
        line = (
            f"- {entry.get('artifact_id')}: from {entry.get('source')}, "
            f"{int(entry.get('chars') or 0):,} chars (~{int(entry.get('tokens') or 0):,} tokens)"
        )
        if preview:
            line += f": {preview}"
        lines.append(escape_value(line))
    return "\n".join(lines)


BUILTIN_CHANNELS: tuple[DurableChannel, ...] = (
    DurableChannel("summary_text", lambda v: render_summary_section(v), SUMMARY_CHAR_BUDGET + 200),
    DurableChannel("delegations", render_delegations, 6000),
    DurableChannel("skill_context", render_skills, 6000),
    DurableChannel("offloads", render_offloads, OFFLOAD_RENDER_BUDGET),
)


def render_sections(
    state: Mapping[str, Any], channels: Sequence[DurableChannel] = BUILTIN_CHANNELS
) -> list[str]:
    """Render every channel with a value, in order, each within its budget."""
    sections: list[str] = []
    for channel in channels:
        value = state.get(channel.key) if isinstance(state, Mapping) else None
        if not value:
            continue
        text = channel.render(value)
        if text:
            sections.append(bound_text(text, channel.budget_chars))
    return sections
