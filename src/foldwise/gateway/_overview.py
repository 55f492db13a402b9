"""`POST /threads/overview`: the caller's threads with what a thread list shows about each.

Titles, message and compaction counts and the latest context size come from the transcript in
two storage queries per page (`GatewayStorage.thread_activity`), whatever the threads hold.
Status is read as `/threads/search` reads it (the lease for threads stored busy, the head
checkpoint's pending writes for interrupts); the artifact count lists each thread's artifacts
in its agent's store (through the store's async methods, off the event loop for files), and is
`null` when the store cannot be read.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from foldwise.errors import StorageError
from foldwise.gateway._artifacts import artifact_store_for
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import MAX_OFFSET
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway._thread_state import listed_view, pending_interrupts
from foldwise.gateway.storage import ThreadActivity, ThreadRecord

__all__ = ["MAX_OVERVIEW_PAGE", "ThreadOverviewRequest", "router"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["threads"])

MAX_OVERVIEW_PAGE = 200
"""Largest `limit` of one overview page."""


class ThreadOverviewRequest(BaseModel):
    """`POST /threads/overview` (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=50, ge=1, le=MAX_OVERVIEW_PAGE)
    """Threads per page."""
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    """Threads to skip."""
    query: str | None = Field(default=None, max_length=200)
    """Keep threads whose id, title or a metadata value contains this (any case)."""
    thread_id: str | None = Field(default=None, min_length=1, max_length=256)
    """Only this thread (exact id): the row a page showing one thread keeps fresh."""


async def _status(gateway: Gateway, record: ThreadRecord) -> str:
    """`idle`, `busy`, `interrupted` or `error`, as `/threads/search` says it."""
    busy = False
    if record.status == "busy":
        storage = gateway.storage
        busy = await storage.get_thread_lock(record.thread_id) is not None or bool(
            await storage.thread_pending_runs(record.thread_id)
        )
    interrupts = {} if busy else await pending_interrupts(gateway.checkpointer, record.thread_id)
    return str(listed_view(record, busy=busy, interrupts=interrupts)["status"])


async def _artifact_count(gateway: Gateway, record: ThreadRecord) -> int | None:
    store = artifact_store_for(gateway, record)
    try:
        return len(await store.alist(record.thread_id))
    except (StorageError, OSError, ValueError) as error:
        logger.warning("thread %s: cannot count artifacts: %s", record.thread_id, error)
        return None


def _window(gateway: Gateway, record: ThreadRecord) -> int | None:
    middleware = gateway.agent_for(record).summarization
    return middleware.policy.context_window if middleware is not None else None


async def _overview(gateway: Gateway, activity: ThreadActivity) -> dict[str, Any]:
    record = activity.thread
    status, artifacts = await asyncio.gather(
        _status(gateway, record), _artifact_count(gateway, record)
    )
    window = _window(gateway, record)
    tokens = activity.context_tokens
    return {
        "thread_id": record.thread_id,
        "status": status,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "metadata": record.metadata,
        "title": activity.title,
        "message_count": activity.message_count,
        "compaction_count": activity.compaction_count,
        "artifact_count": artifacts,
        "context": {
            "tokens": tokens,
            "window": window,
            "fraction": round(tokens / window, 4) if tokens is not None and window else None,
            "as_of": activity.context_source,
        },
    }


@router.post("/threads/overview")
async def thread_overview(
    gateway: GatewayDep, identity: IdentityDep, body: ThreadOverviewRequest | None = None
) -> Response:
    """The caller's threads, newest activity first, with title, counts and context fill.

    Returns `{"threads": [...], "has_more": bool}`.
    """
    body = body or ThreadOverviewRequest()
    check_values(body.query, "query", nul=False)
    check_values(body.thread_id, "thread_id", nul=False)
    page = await gateway.storage.thread_activity(
        owner=identity,
        query=body.query or None,
        thread_id=body.thread_id,
        limit=body.limit + 1,
        offset=body.offset,
    )
    shown = page[: body.limit]
    threads = await asyncio.gather(*(_overview(gateway, a) for a in shown))
    return JSONResponse({"threads": list(threads), "has_more": len(page) > body.limit})
