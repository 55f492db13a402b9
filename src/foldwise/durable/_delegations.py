"""The `delegations` channel: a ledger of sub-agent tasks that survives compaction."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from foldwise.durable._render import bound_text

__all__ = [
    "DELEGATION_RENDER_BUDGET",
    "MAX_DELEGATIONS",
    "TERMINAL_STATUSES",
    "changed_delegations",
    "extract_delegations",
    "merge_delegations",
    "render_delegations",
]

MAX_DELEGATIONS = 50
DELEGATION_RENDER_BUDGET = 6000
TERMINAL_STATUSES = frozenset(
    {"completed", "failed", "cancelled", "timed_out", "polling_timed_out"}
)
_DESCRIPTION_CAP = 200
_RESULT_CAP = 2000
_RENDER_RESULT_CAP = 120
_CANNED = {
    "failed": "Task failed.",
    "cancelled": "Task cancelled by user.",
    "timed_out": "Task timed out.",
    "polling_timed_out": "Task polling timed out.",
}
_STABLE = ("description", "subagent_type", "status", "result_brief", "result_sha256", "result_ref")
DELEGATION_TOOL_NAMES = frozenset({"task"})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def extract_delegations(
    messages: Sequence[BaseMessage],
    *,
    tool_names: frozenset[str] = DELEGATION_TOOL_NAMES,
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """Ledger entries for every `task`-style call in `messages`.

    Structured metadata on the paired ToolMessage (`subagent_status`, `subagent_result_brief`,
    `subagent_result_sha256`, `subagent_error`, `subagent_stop_reason` in `additional_kwargs`)
    is the only source of status and result: message text is never parsed.
    """
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    entries: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            if call.get("name") not in tool_names or not call.get("id"):
                continue
            args = call.get("args") or {}
            description = _one_line(args.get("description") or args.get("prompt") or "")
            entry: dict[str, Any] = {
                "id": str(call["id"]),
                "description": description[:_DESCRIPTION_CAP],
                "subagent_type": str(args.get("subagent_type") or "general"),
                "status": "in_progress",
                "created_at": _now(),
            }
            if run_id:
                entry["run_id"] = run_id
            result = results.get(str(call["id"]))
            if result is not None:
                _apply_metadata(entry, result)
            entries.append(entry)
    return entries


def _apply_metadata(entry: dict[str, Any], result: ToolMessage) -> None:
    meta = result.additional_kwargs
    status = meta.get("subagent_status")
    if status == "max_turns_reached":
        status, entry["stop_reason"] = "completed", "turn_capped"
    if status not in TERMINAL_STATUSES:
        return
    entry["status"] = status
    if meta.get("subagent_stop_reason"):
        entry["stop_reason"] = str(meta["subagent_stop_reason"])
    text = (
        meta.get("subagent_result_brief") or meta.get("subagent_error") or _CANNED.get(status, "")
    )
    text = str(text)
    entry["result_brief"] = bound_text(text, _RESULT_CAP)
    entry["result_sha256"] = str(
        meta.get("subagent_result_sha256") or hashlib.sha256(text.encode("utf-8")).hexdigest()
    )
    entry["result_ref"] = str(result.id or result.tool_call_id)


def changed_delegations(
    existing: Sequence[dict[str, Any]], found: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The entries of `found` that are new or differ in a stable field (no regressions).

    When the ledger is full, calls older than its earliest retained entry were evicted on
    purpose and are not emitted again.
    """
    known = {e["id"]: e for e in existing}
    window = list(found)
    if len(existing) >= MAX_DELEGATIONS:
        first_kept = next((i for i, e in enumerate(window) if e["id"] == existing[0]["id"]), None)
        if first_kept is not None:
            window = window[first_kept:]
    changed: list[dict[str, Any]] = []
    for entry in window:
        old = known.get(entry["id"])
        if old is None:
            changed.append(entry)
        elif old.get("status") in TERMINAL_STATUSES and entry["status"] not in TERMINAL_STATUSES:
            continue
        elif any(old.get(k) != entry.get(k) for k in _STABLE):
            changed.append(entry)
    return changed


def merge_delegations(
    existing: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Reducer: same id takes the newest version, terminal never regresses, newest 50 kept."""
    merged: dict[str, dict[str, Any]] = {e["id"]: dict(e) for e in existing or []}
    for entry in new or []:
        old = merged.get(entry["id"])
        if old is None:
            merged[entry["id"]] = dict(entry)
            continue
        if old.get("status") in TERMINAL_STATUSES and entry.get("status") not in TERMINAL_STATUSES:
            continue
        updated = {**old, **entry, "created_at": old.get("created_at", entry.get("created_at"))}
        if not entry.get("run_id") and old.get("run_id"):
            updated["run_id"] = old["run_id"]
        merged[entry["id"]] = updated
    return list(merged.values())[-MAX_DELEGATIONS:]


def _guidance(entry: dict[str, Any]) -> str:
    status = entry.get("status")
    if entry.get("stop_reason"):
        return "stopped early; reuse the partial result or delegate again with a larger budget"
    if status == "in_progress":
        return "already delegated; do not delegate again"
    if status == "completed":
        return "completed; reuse the result, do not delegate again"
    return "may retry with a changed plan"


def render_delegations(
    entries: Sequence[dict[str, Any]], budget: int = DELEGATION_RENDER_BUDGET
) -> str:
    """The ledger newest first as plain text (the data block escapes it), within `budget`."""
    if not entries:
        return ""
    lines = [
        "## Work already delegated",
        "Newest first. in_progress: already running; completed: reuse the result; "
        "failed, cancelled or timed out: earlier attempts.",
    ]
    body: list[str] = []
    for entry in reversed(entries):
        brief = _one_line(entry.get("result_brief") or "")[:_RENDER_RESULT_CAP]
        line = (
            f"- [{_one_line(entry.get('status'))}] {_one_line(entry.get('description', ''))} "
            f"(via {_one_line(entry.get('subagent_type', ''))}; {_guidance(entry)})"
        )
        if brief:
            line += f" -> {_one_line(brief)}"
        body.append(line)
    text = "\n".join([*lines, *body])
    omitted = 0
    while len(text) > budget and body:
        body.pop()
        omitted += 1
        marker = f"- ... {omitted} older delegation entries omitted from this view (context budget)"
        text = "\n".join([*lines, *body, marker])
    return text if len(text) <= budget else text[: budget - 4] + "\n..."
