"""The `offloads` channel: recent offload events, kept small, deduplicated by artifact id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_OFFLOAD_EVENTS", "merge_offloads"]

MAX_OFFLOAD_EVENTS = 50
"""The channel keeps at most this many entries (the newest)."""


def _entries(value: object) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [item for item in value if isinstance(item, Mapping)]
    return []


def merge_offloads(left: object, right: object) -> list[dict[str, Any]]:
    """Merge offload events into the `offloads` channel (a LangGraph reducer).

    Each entry is an artifact reference dict (`ArtifactRef.to_dict()`). An entry whose
    `artifact_id` is already present replaces the old one and counts as the newest; an entry
    `{"artifact_id": ..., "removed": True}` drops that artifact (what garbage collection
    emits); entries without a string `artifact_id` are ignored. At most the newest 50 are kept.

    Args:
        left: The current channel value (a list of dicts, or None).
        right: The update (a list of dicts, one dict, or None).

    Returns:
        A new list, oldest first; the inputs are not modified.
    """
    merged: dict[str, dict[str, Any]] = {}
    for entry in [*_entries(left), *_entries(right)]:
        artifact_id = entry.get("artifact_id")
        if not isinstance(artifact_id, str):
            continue
        merged.pop(artifact_id, None)
        if not entry.get("removed"):
            merged[artifact_id] = dict(entry)
    values = list(merged.values())
    return values[-MAX_OFFLOAD_EVENTS:]
