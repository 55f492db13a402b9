"""Thread routes, LangGraph-Server shaped: create, get, patch, delete, search, count, copy.

The state routes (get, update, at a checkpoint, history) are in `_thread_state`.
`status` is `busy` while a run holds the thread, `interrupted` when its head checkpoint has
pending interrupts, `error` after a failed run, else `idle`. The thread table knows busy and
error; interrupts are read from the checkpoint, so the `idle` and `interrupted` filters of
`search` and `count` read one checkpoint per idle candidate.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Literal

from fastapi import APIRouter, Response

from foldwise.gateway._deps import (
    Gateway,
    GatewayDep,
    IdentityDep,
    ThreadIdDep,
    require_thread,
    thread_json,
)
from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import (
    MAX_PAGE,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    refuse_if_set,
)
from foldwise.gateway._serde import JSONResponse, jsonable
from foldwise.gateway._thread_copy import copy_checkpoints, copy_records
from foldwise.gateway._thread_state import (
    listed_view,
    pending_interrupts,
    thread_view,
)
from foldwise.gateway._thread_state import router as state_router
from foldwise.gateway.storage import ThreadExistsError, ThreadRecord, validate_thread_id

__all__ = ["router"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["threads"])
router.include_router(state_router)


async def _busy(gateway: GatewayDep, record: ThreadRecord) -> bool:
    """Held by an operation, or runs wait queued on it (as LangGraph Server says `busy`)."""
    storage = gateway.storage
    if await storage.get_thread_lock(record.thread_id) is not None:
        return True
    return bool(await storage.thread_pending_runs(record.thread_id))


async def _listed(gateway: Gateway, record: ThreadRecord, *, trust_status: bool) -> dict[str, Any]:
    """The thread as listed: no values; busy from the lease, interrupts from the head checkpoint.

    With `trust_status` (listings), a thread stored as not busy is not asked for its lease.
    """
    if trust_status and record.status != "busy":
        busy = False
    else:
        busy = await _busy(gateway, record)
    interrupts = {} if busy else await pending_interrupts(gateway.checkpointer, record.thread_id)
    return listed_view(record, busy=busy, interrupts=interrupts)


async def _with_values(
    gateway: Gateway, record: ThreadRecord, view: dict[str, Any]
) -> dict[str, Any]:
    """A listed thread with its current state values, as LangGraph Server's search answers.

    Clients label threads with them (agent-chat-ui's history shows each thread's first message).
    """
    snapshot = await gateway.agent_for(record).graph.aget_state(
        {"configurable": {"thread_id": record.thread_id}}
    )
    values = snapshot.values if snapshot is not None and snapshot.values else None
    return {**view, "values": jsonable(values) if values is not None else None}


async def _scan_idle(
    gateway: Gateway,
    body: ThreadSearch | ThreadCount,
    status: str,
    stop: int | None,
    owner: str,
) -> list[tuple[ThreadRecord, dict[str, Any]]]:
    """Threads stored as idle whose head says `status` (`idle` or `interrupted`), up to `stop`.

    Whether an idle thread is interrupted is in its checkpoint, not in the thread table, so
    these two filters read one checkpoint per candidate.
    """
    sort_by = (body.sort_by if isinstance(body, ThreadSearch) else None) or "created_at"
    found: list[tuple[ThreadRecord, dict[str, Any]]] = []
    offset = 0
    while stop is None or len(found) < stop:
        page = await gateway.storage.search_threads(
            metadata=body.metadata,
            status="idle",
            limit=MAX_PAGE,
            offset=offset,
            sort_by=sort_by,
            owner=owner,
        )
        for record in page:
            view = await _listed(gateway, record, trust_status=True)
            if view["status"] == status:
                found.append((record, view))
        offset += len(page)
        if len(page) < MAX_PAGE:
            break
    return found if stop is None else found[:stop]


@router.post("/threads")
async def create_thread(gateway: GatewayDep, identity: IdentityDep, body: ThreadCreate) -> Response:
    """Create a thread owned by the caller (`if_exists`: `raise` → 409, `do_nothing` → it)."""
    refuse_if_set(body, "supersteps", "ttl")
    check_values(body.metadata, "metadata")
    if body.thread_id is None:
        thread_id = str(uuid.uuid4())
    else:
        try:
            thread_id = validate_thread_id(body.thread_id)
        except ValueError as error:
            raise RequestFieldError("thread_id", str(error)) from None
    try:
        record = await gateway.storage.create_thread(thread_id, body.metadata or {}, owner=identity)
    except ThreadExistsError:
        mine = await gateway.storage.get_thread(thread_id, owner=identity)
        if body.if_exists != "do_nothing" or mine is None:
            raise  # another identity's thread is not handed out: 409 as for any taken id
        return JSONResponse(await _listed(gateway, mine, trust_status=False))
    return JSONResponse(thread_json(record, busy=False))


@router.get("/threads/{thread_id}")
async def get_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """The thread with its current state values and pending interrupts."""
    record = await require_thread(gateway, thread_id, identity)
    snapshot = await gateway.agent_for(record).graph.aget_state(
        {"configurable": {"thread_id": thread_id}}
    )
    return JSONResponse(thread_view(record, snapshot, busy=await _busy(gateway, record)))


@router.post("/threads/count")
async def count_threads(
    gateway: GatewayDep, identity: IdentityDep, body: ThreadCount | None = None
) -> Response:
    """How many threads match `metadata` and `status` (the filters of `/threads/search`)."""
    body = body or ThreadCount()
    refuse_if_set(body, "values", why="filtering on state values is not supported")
    check_values(body.metadata, "metadata")
    if body.status in ("idle", "interrupted"):
        return JSONResponse(len(await _scan_idle(gateway, body, body.status, None, identity)))
    total, offset = 0, 0
    while True:  # pages through storage search, the one way threads are listed
        page = await gateway.storage.search_threads(
            metadata=body.metadata,
            status=_stored(body.status),
            limit=MAX_PAGE,
            offset=offset,
            owner=identity,
        )
        total += len(page)
        offset += len(page)
        if len(page) < MAX_PAGE:
            return JSONResponse(total)


@router.post("/threads/{thread_id}/copy")
async def copy_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """A new thread with the same metadata, checkpoint history, transcript and receipts.

    Runs are not copied, nor offloaded artifacts (their ids derive from the thread).
    """
    record = await require_thread(gateway, thread_id, identity)
    copy = await gateway.storage.create_thread(str(uuid.uuid4()), record.metadata, owner=identity)
    try:
        copied = await copy_checkpoints(gateway.checkpointer, thread_id, copy.thread_id)
        entries = await copy_records(gateway.storage, thread_id, copy.thread_id)
    except BaseException:
        # No half copy left behind: the client never learnt the new id.
        await gateway.checkpointer.adelete_thread(copy.thread_id)
        await gateway.storage.delete_thread(copy.thread_id)
        raise
    logger.info(
        "thread %s: copied %d checkpoint(s) and %d transcript entries to %s",
        thread_id,
        copied,
        entries,
        copy.thread_id,
    )
    snapshot = await gateway.agent_for(copy).graph.aget_state(
        {"configurable": {"thread_id": copy.thread_id}}
    )
    return JSONResponse(thread_view(copy, snapshot, busy=False))


@router.patch("/threads/{thread_id}")
async def patch_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: ThreadPatch
) -> Response:
    """Shallow-merge metadata into the thread's."""
    refuse_if_set(body, "ttl")
    check_values(body.metadata, "metadata")
    await require_thread(gateway, thread_id, identity)
    record = await gateway.storage.update_thread(thread_id, metadata=body.metadata)
    if record is None:
        record = await require_thread(gateway, thread_id, identity)
    return JSONResponse(await _listed(gateway, record, trust_status=False))


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """Delete the thread: its checkpoints, offloaded artifacts, runs, transcript and receipts.

    Refused with 409 while a run or compaction holds the thread. A background summary of it
    running in this process is cancelled and dropped.
    """
    await require_thread(gateway, thread_id, identity)
    async with gateway.runs.exclusive(thread_id, "delete"):
        # Its background summary (pre-summarization) would keep sending its messages out.
        gateway.agents.forget_thread(thread_id)
        for store in gateway.agents.artifact_stores():
            removed = await store.adelete_thread(thread_id)
            logger.info("thread %s: deleted %d offloaded artifact(s)", thread_id, len(removed))
        await gateway.checkpointer.adelete_thread(thread_id)
        # Last: until this succeeds the thread is still listed, so a retry can finish the job.
        await gateway.storage.delete_thread(thread_id)
    return Response(status_code=204)


@router.post("/threads/search")
async def search_threads(
    gateway: GatewayDep, identity: IdentityDep, body: ThreadSearch
) -> Response:
    """The caller's threads whose metadata contains `metadata`, newest first, with `values`."""
    refuse_if_set(body, "values", why="filtering on state values is not supported")
    check_values(body.metadata, "metadata")
    if body.ids is not None:
        ids = [_checked_id(value, f"ids[{i}]") for i, value in enumerate(body.ids)]
        found = await asyncio.gather(*(gateway.storage.get_thread(i, owner=identity) for i in ids))
        views = [
            (r, await _listed(gateway, r, trust_status=True))
            for r in found
            if r is not None and _contains(r.metadata, body.metadata or {})
        ]
        out = [(r, v) for r, v in views if body.status in (None, v["status"])]
        pairs = out[body.offset : body.offset + body.limit]
    elif body.status in ("idle", "interrupted"):
        scanned = await _scan_idle(gateway, body, body.status, body.offset + body.limit, identity)
        pairs = scanned[body.offset :]
    else:
        pairs = await _search_stored(gateway, identity, body)
    return JSONResponse([await _with_values(gateway, r, v) for r, v in pairs])


async def _search_stored(
    gateway: Gateway, identity: str, body: ThreadSearch
) -> list[tuple[ThreadRecord, dict[str, Any]]]:
    """`search` without an idle/interrupted filter: one page of the thread table."""
    records = await gateway.storage.search_threads(
        metadata=body.metadata,
        status=_stored(body.status),
        limit=body.limit,
        offset=body.offset,
        sort_by=body.sort_by or "created_at",
        owner=identity,
    )
    # The stored status says busy while a run holds the thread; the lease says it for sure.
    return [(r, await _listed(gateway, r, trust_status=True)) for r in records]


def _stored(status: str | None) -> Literal["busy", "error"] | None:
    """The thread-table filter for `busy`, `error` or none (idle and interrupted are scanned)."""
    if status == "busy":
        return "busy"
    return "error" if status == "error" else None


def _checked_id(value: str, field: str) -> str:
    try:
        return validate_thread_id(value)
    except ValueError as error:
        raise RequestFieldError(field, str(error)) from None


def _contains(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(metadata.get(k) == v for k, v in wanted.items())
