"""Thread routes, LangGraph-Server shaped: create, get, patch, delete, search, state, history."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from fastapi import APIRouter, Response

from foldwise.gateway._deps import (
    GatewayDep,
    IdentityDep,
    ThreadIdDep,
    require_thread,
    state_json,
    thread_json,
)
from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import (
    HistoryRequest,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
    check_filter_ints,
    refuse_if_set,
)
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import ThreadExistsError, ThreadRecord, validate_thread_id

__all__ = ["router"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["threads"])


async def _busy(gateway: GatewayDep, record: ThreadRecord) -> bool:
    return await gateway.storage.get_thread_lock(record.thread_id) is not None


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
        record = mine
        return JSONResponse(thread_json(record, busy=await _busy(gateway, record)))
    return JSONResponse(thread_json(record, busy=False))


@router.get("/threads/{thread_id}")
async def get_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """The thread with its current state values."""
    record = await require_thread(gateway, thread_id, identity)
    snapshot = await gateway.agent_for(record).graph.aget_state(
        {"configurable": {"thread_id": thread_id}}
    )
    values = snapshot.values if snapshot.values else None
    return JSONResponse(thread_json(record, busy=await _busy(gateway, record), values=values))


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
    return JSONResponse(thread_json(record, busy=await _busy(gateway, record)))


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """Delete the thread: its checkpoints, offloaded artifacts, runs, transcript and receipts.

    Refused with 409 while a run or compaction holds the thread.
    """
    await require_thread(gateway, thread_id, identity)
    async with gateway.runs.exclusive(thread_id, "delete"):
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
    """The caller's threads whose metadata contains `metadata`, newest first (no `values`)."""
    refuse_if_set(body, "values", why="filtering on state values is not supported")
    check_values(body.metadata, "metadata")
    if body.status == "interrupted":
        return JSONResponse([])  # human-in-the-loop interrupts do not exist here
    if body.ids is not None:
        ids = [_checked_id(value, f"ids[{i}]") for i, value in enumerate(body.ids)]
        found = await asyncio.gather(*(gateway.storage.get_thread(i, owner=identity) for i in ids))
        records = [
            r
            for r in found
            if r is not None
            and _contains(r.metadata, body.metadata or {})
            and body.status in (None, r.status)
        ][body.offset : body.offset + body.limit]
    else:
        records = await gateway.storage.search_threads(
            metadata=body.metadata,
            status=body.status,
            limit=body.limit,
            offset=body.offset,
            sort_by=body.sort_by or "created_at",
            owner=identity,
        )
    out: list[dict[str, Any]] = []
    for record in records:
        # The stored status says busy while a run holds the thread; the lease says it for sure.
        busy = record.status == "busy" and await _busy(gateway, record)
        out.append(thread_json(record, busy=busy))
    return JSONResponse(out)


def _checked_id(value: str, field: str) -> str:
    try:
        return validate_thread_id(value)
    except ValueError as error:
        raise RequestFieldError(field, str(error)) from None


def _contains(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(metadata.get(k) == v for k, v in wanted.items())


@router.get("/threads/{thread_id}/state")
async def get_state(gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep) -> Response:
    """The latest state of the thread (`values`, `next`, `checkpoint`, `metadata`, ...)."""
    record = await require_thread(gateway, thread_id, identity)
    graph = gateway.agent_for(record).graph
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    return JSONResponse(state_json(snapshot))


@router.post("/threads/{thread_id}/history")
async def get_history(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    body: HistoryRequest | None = None,
) -> Response:
    """Past states of the thread, newest first (`limit`, `before`, `metadata` filter)."""
    body = body or HistoryRequest()
    if body.checkpoint and body.checkpoint.get("checkpoint_ns"):
        raise RequestFieldError("checkpoint.checkpoint_ns", "subgraph history is not supported")
    check_values(body.metadata, "metadata")
    check_filter_ints(body.metadata, "metadata")
    record = await require_thread(gateway, thread_id, identity)
    graph = gateway.agent_for(record).graph
    config = {"configurable": {"thread_id": thread_id}}
    before_id = body.before_id()
    before = (
        {"configurable": {"thread_id": thread_id, "checkpoint_id": before_id}}
        if before_id
        else None
    )
    states: list[dict[str, Any]] = []
    async for snapshot in graph.aget_state_history(
        config, filter=body.metadata or None, before=before, limit=body.limit
    ):
        states.append(state_json(snapshot))
    return JSONResponse(states)
