"""Thread state routes, LangGraph-Server shaped: state, update, state at a checkpoint, history.

`POST /threads/{id}/state` is LangGraph's `update_state`: it writes a new checkpoint as if
`as_node` had run. Only `values.messages` may be written (the other channels are foldwise's
bookkeeping), and the messages go through the same validation as run input, so a client cannot
set foldwise's internal flags. It holds the thread like a run does (409 while one runs), and
the messages it adds are recorded in the transcript (with no run id) before the thread is
released.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import InvalidUpdateError

from foldwise.gateway._capture import TranscriptRecorder
from foldwise.gateway._checkpoint_head import read_head
from foldwise.gateway._deps import (
    Gateway,
    GatewayDep,
    IdentityDep,
    ThreadIdDep,
    require_thread,
    state_json,
    thread_json,
)
from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._inputs import parse_messages_object
from foldwise.gateway._leases import lease_of
from foldwise.gateway._messages import check_new_ids, check_tool_results, check_values
from foldwise.gateway._schemas import (
    HistoryRequest,
    StateAtCheckpoint,
    StateUpdate,
    check_filter_ints,
    checkpoint_id_checked,
)
from foldwise.gateway._serde import JSONResponse, jsonable
from foldwise.gateway.storage import ThreadRecord
from foldwise.messages import analyze_tool_pairing

__all__ = ["listed_view", "pending_interrupts", "router", "thread_view"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["threads"])


def _interrupts(snapshot: Any) -> dict[str, list[dict[str, Any]]]:
    """Pending interrupts by task id (`Thread.interrupts`)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for task in getattr(snapshot, "tasks", None) or ():
        pending = list(getattr(task, "interrupts", ()) or ())
        if pending:
            found[str(task.id)] = jsonable(pending)
    return found


def listed_view(
    record: ThreadRecord,
    *,
    busy: bool,
    interrupts: dict[str, list[dict[str, Any]]],
    values: Any = None,
) -> dict[str, Any]:
    """A thread with its interrupts, `interrupted` when it has some and is otherwise idle."""
    view = thread_json(record, busy=busy, values=values)
    view["interrupts"] = interrupts
    if interrupts and view["status"] == "idle":
        view["status"] = "interrupted"
    return view


def thread_view(record: ThreadRecord, snapshot: Any, *, busy: bool) -> dict[str, Any]:
    """A thread with its state values and interrupts, from a loaded state snapshot."""
    values = snapshot.values if snapshot is not None and snapshot.values else None
    return listed_view(record, busy=busy, interrupts=_interrupts(snapshot), values=values)


async def pending_interrupts(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str
) -> dict[str, list[dict[str, Any]]]:
    """The interrupts pending at the thread's head, by task id, without loading its values."""
    head = await read_head(checkpointer, thread_id)
    return head.interrupts if head is not None else {}


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def _require_checkpoint(gateway: Gateway, thread_id: str, checkpoint_id: str) -> None:
    if await gateway.checkpointer.aget_tuple(_config(thread_id, checkpoint_id)) is None:  # type: ignore[arg-type]
        raise HTTPException(
            404, detail=f"checkpoint {checkpoint_id!r} not found in thread {thread_id!r}"
        )


@router.get("/threads/{thread_id}/state")
async def get_state(gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep) -> Response:
    """The latest state of the thread (`values`, `next`, `checkpoint`, `metadata`, ...)."""
    record = await require_thread(gateway, thread_id, identity)
    graph = gateway.agent_for(record).graph
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    return JSONResponse(state_json(snapshot))


async def _state_at(
    gateway: Gateway, thread_id: str, checkpoint_id: str, identity: str
) -> Response:
    record = await require_thread(gateway, thread_id, identity)
    checkpoint_id_checked(checkpoint_id, "checkpoint_id")
    await _require_checkpoint(gateway, thread_id, checkpoint_id)
    graph = gateway.agent_for(record).graph
    snapshot = await graph.aget_state(_config(thread_id, checkpoint_id))
    return JSONResponse(state_json(snapshot))


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def get_state_at(
    gateway: GatewayDep, thread_id: ThreadIdDep, checkpoint_id: str, identity: IdentityDep
) -> Response:
    """The thread's state at a checkpoint (404 for a checkpoint the thread does not have)."""
    return await _state_at(gateway, thread_id, checkpoint_id, identity)


@router.post("/threads/{thread_id}/state/checkpoint")
async def post_state_at(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: StateAtCheckpoint
) -> Response:
    """The thread's state at `checkpoint.checkpoint_id` (404 when unknown)."""
    return await _state_at(gateway, thread_id, body.checkpoint_id(), identity)


def _update_values(values: Any) -> dict[str, Any] | None:
    """The validated update: `{"messages": [...]}` only, messages parsed like run input."""
    if values is None:
        return None
    messages = parse_messages_object(values, "values", lenient=True)
    return {"messages": messages} if messages else {}


async def _check_update(graph: Any, config: Any, messages: list[BaseMessage]) -> None:
    """The checks a run's input gets: new ids only, tool results that answer pending calls."""
    snapshot = await graph.aget_state(config)
    history = list((snapshot.values or {}).get("messages") or [])
    check_new_ids(messages, history, "values.messages")
    pending = [call_id for _, call_id in analyze_tool_pairing(history).pending_calls]
    check_tool_results(messages, pending, field="values.messages")


@router.post("/threads/{thread_id}/state")
async def update_state(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: StateUpdate
) -> Response:
    """Write a new checkpoint as if `as_node` had run; answers `{"checkpoint": {...}}`.

    409 while a run holds the thread; 404 for an unknown thread or `checkpoint`; 422 for an
    invalid update (a channel other than `messages`, an unknown `as_node`).
    """
    values = _update_values(body.values)
    checkpoint_id = body.target_checkpoint()
    record = await require_thread(gateway, thread_id, identity)
    graph = gateway.agent_for(record).graph
    if body.as_node is not None and body.as_node not in {*graph.nodes, "__end__"}:
        raise RequestFieldError("as_node", f"{body.as_node!r} is not a node of the agent")
    async with gateway.runs.exclusive(thread_id, "update", graph=graph) as operation_id:
        if checkpoint_id is not None:
            await _require_checkpoint(gateway, thread_id, checkpoint_id)
        config = _config(thread_id, checkpoint_id)
        if values and values.get("messages"):
            await _check_update(graph, config, values["messages"])
        config["configurable"].update(gateway.runs.leases.fence(thread_id, operation_id))
        try:
            written = await graph.aupdate_state(config, values, as_node=body.as_node)
        except InvalidUpdateError as error:
            raise RequestFieldError("as_node", str(error)) from None
        if values and values.get("messages"):
            # Accepted input goes to the transcript (append-only: a replaced id stays as it was).
            recorder = TranscriptRecorder(gateway.storage, thread_id, None)
            recorder.lease = lease_of(config)
            await recorder.messages(values["messages"])
    configurable = written.get("configurable") or {}
    return JSONResponse(
        {
            "checkpoint": {
                "thread_id": thread_id,
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": configurable.get("checkpoint_id"),
                "checkpoint_map": configurable.get("checkpoint_map") or {},
            }
        }
    )


@router.post("/threads/{thread_id}/history")
async def get_history(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    body: HistoryRequest | None = None,
) -> Response:
    """Past states, newest first (`limit`, `before`, `checkpoint` to start at, `metadata`)."""
    body = body or HistoryRequest()
    if body.checkpoint and body.checkpoint.get("checkpoint_ns"):
        raise RequestFieldError("checkpoint.checkpoint_ns", "subgraph history is not supported")
    check_values(body.metadata, "metadata")
    check_filter_ints(body.metadata, "metadata")
    record = await require_thread(gateway, thread_id, identity)
    graph = gateway.agent_for(record).graph
    config = {"configurable": {"thread_id": thread_id}}
    start_id = body.start_id()
    if start_id is not None:
        config = _config(thread_id, start_id)
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
