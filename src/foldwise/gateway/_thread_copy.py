"""`POST /threads/{id}/copy`'s work: a thread's checkpoints, transcript and receipts, copied.

LangGraph Server copies a thread's whole checkpoint history; foldwise also copies what it keeps
beside the checkpoints (the transcript and the compaction receipts), so the copy reads like the
source from its first message. Runs and offloaded artifacts are not copied.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from foldwise.gateway.storage import GatewayStorage, TranscriptEvent

__all__ = ["COPY_PAGE", "copy_checkpoints", "copy_records"]

COPY_PAGE = 50
"""Checkpoints read at a time by `copy_checkpoints` (each holds the whole state)."""


async def copy_checkpoints(
    checkpointer: BaseCheckpointSaver[Any], source_id: str, target_id: str
) -> int:
    """Copy every checkpoint of a thread, with its pending writes, to another thread id.

    Checkpoint ids and parents are kept, so the copy's history, forks and pending interrupts
    are the source's. Read a page at a time, newest first (the order of the writes does not
    matter: a thread's head is its greatest checkpoint id). Returns how many were copied.
    """
    source = {"configurable": {"thread_id": source_id}}
    copied = 0
    before: dict[str, Any] | None = None
    while True:
        # A page is read completely before writing: SQLite's saver holds its lock while listing.
        page = [
            saved
            async for saved in checkpointer.alist(source, before=before, limit=COPY_PAGE)  # type: ignore[arg-type]
        ]
        for saved in page:
            await _copy_one(checkpointer, saved, target_id)
        copied += len(page)
        if len(page) < COPY_PAGE:
            return copied
        before = {"configurable": {"checkpoint_id": page[-1].checkpoint["id"]}}


async def _copy_one(checkpointer: BaseCheckpointSaver[Any], saved: Any, target_id: str) -> None:
    configurable: dict[str, Any] = {
        "thread_id": target_id,
        "checkpoint_ns": saved.config["configurable"].get("checkpoint_ns", ""),
    }
    parent = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    if parent is not None:
        configurable["checkpoint_id"] = parent
    written = await checkpointer.aput(
        {"configurable": configurable},
        saved.checkpoint,
        saved.metadata,
        dict(saved.checkpoint["channel_versions"]),
    )
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in saved.pending_writes or ():
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        await checkpointer.aput_writes(written, writes, task_id)


async def copy_records(storage: GatewayStorage, source_id: str, target_id: str) -> int:
    """Copy the transcript (times kept) and the compaction receipts; return how many entries.

    Run ids are dropped: the runs are the source's and are not copied.
    """
    offset = 0
    while True:
        receipts = await storage.list_receipts(source_id, limit=COPY_PAGE, offset=offset)
        for record in receipts:
            # The markers come with the transcript below, in their places.
            await storage.add_receipt(target_id, record.receipt)
        offset += len(receipts)
        if len(receipts) < COPY_PAGE:
            break
    copied, after = 0, 0
    while True:
        entries = await storage.list_transcript(source_id, after_seq=after, limit=COPY_PAGE)
        events = [
            TranscriptEvent(
                kind=e.kind, message=e.message, message_id=e.message_id, created_at=e.created_at
            )
            for e in entries
        ]
        if events:
            copied += len(await storage.append_transcript(target_id, events))
            after = entries[-1].seq
        if len(entries) < COPY_PAGE:
            return copied
