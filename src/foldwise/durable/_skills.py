"""The `skill_context` channel: references to loaded `SKILL.md` files, never their bodies."""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Collection, Sequence
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = [
    "MAX_SKILLS",
    "SKILL_METADATA_KEY",
    "extract_skills",
    "merge_skill_context",
    "render_skills",
    "skill_metadata",
    "skill_path",
]

logger = logging.getLogger(__name__)

MAX_SKILLS = 8
SKILL_METADATA_KEY = "skill_context_entry"
_DESCRIPTION_CAP = 500
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_PATH_KEYS = ("path", "file_path", "filepath")


def _normalize_root(root: str) -> str:
    normalized = posixpath.normpath(root or "/")
    return normalized if normalized != "." else "/"


def skill_path(call: dict[str, Any], *, root: str, tool_names: Collection[str]) -> str | None:
    """The normalized `SKILL.md` path a read call targets under `root`, or `None`."""
    if call.get("name") not in tool_names:
        return None
    args = call.get("args") or {}
    raw = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    if not raw:
        return None
    path: str = posixpath.normpath(str(raw))
    base = _normalize_root(root)
    prefix = base if base.endswith("/") else base + "/"
    if not path.startswith(prefix) or posixpath.basename(path) != "SKILL.md":
        return None
    return path


def _description(text: str) -> str:
    match = _FRONT_MATTER.match(text.replace("\r\n", "\n"))
    if not match:
        return ""
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return ""
    if not isinstance(data, dict) or not isinstance(data.get("description"), str):
        return ""
    return " ".join(data["description"].split())[:_DESCRIPTION_CAP]


def skill_metadata(
    call: dict[str, Any], result: ToolMessage, *, root: str, tool_names: Collection[str]
) -> dict[str, str] | None:
    """The metadata to stamp on a successful `SKILL.md` read (at the tool boundary)."""
    path = skill_path(call, root=root, tool_names=tool_names)
    if path is None or result.status == "error" or not isinstance(result.content, str):
        return None
    if result.content.lstrip().startswith("Error:"):
        return None
    return {"path": path, "description": _description(result.content)}


def extract_skills(
    messages: Sequence[BaseMessage], *, root: str, tool_names: Collection[str]
) -> list[dict[str, Any]]:
    """Skill references from stamped read results; content is never re-parsed here."""
    if not tool_names:
        return []
    calls: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                path = skill_path(dict(call), root=root, tool_names=tool_names)
                if path and call.get("id"):
                    calls[str(call["id"])] = path
    entries: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, ToolMessage) or message.tool_call_id not in calls:
            continue
        if message.status == "error":
            continue
        meta = message.additional_kwargs.get(SKILL_METADATA_KEY)
        path = calls[message.tool_call_id]
        if not isinstance(meta, dict):
            if not str(message.content).lstrip().startswith("Error:"):
                logger.warning("missing skill read metadata for %s", path)
            continue
        if meta.get("path") != path:
            logger.warning("mismatched skill read metadata for %s", path)
            continue
        description = meta.get("description")
        entries.append(
            {
                "name": posixpath.basename(posixpath.dirname(path)),
                "path": path,
                "description": " ".join(description.split())[:_DESCRIPTION_CAP]
                if isinstance(description, str)
                else "",
                "loaded_at": index,
            }
        )
    return entries


def merge_skill_context(
    existing: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Reducer: dedupe by path, a re-read moves to the end, newest `MAX_SKILLS` kept."""
    merged: list[dict[str, Any]] = []
    for entry in existing or []:
        merged.append(
            {
                "name": str(entry.get("name", "")),
                "path": str(entry.get("path", "")),
                "description": str(entry.get("description") or "")[:_DESCRIPTION_CAP],
                "loaded_at": entry.get("loaded_at")
                if isinstance(entry.get("loaded_at"), int)
                else 0,
            }
        )
    for entry in new or []:
        merged = [e for e in merged if e["path"] != entry.get("path")]
        merged.append(dict(entry))
    return merged[-MAX_SKILLS:]


def render_skills(entries: Sequence[dict[str, Any]]) -> str:
    """Skill references as plain text (the data block escapes them); never the body."""
    if not entries:
        return ""
    lines = [
        "## Active skills (loaded earlier - re-read the file before applying its instructions)"
    ]
    for entry in entries:
        description = " ".join(str(entry.get("description") or "").split())
        line = f"- {entry.get('name')}"
        line += f": {description}" if description else ""
        line += f" -> {entry.get('path')}"
        lines.append(line)
    return "\n".join(lines)
