"""Background runs, LangGraph-Server shaped: create, join, join the stream, cancel.

`POST /threads/{id}/runs` starts a run on the `RunManager` and answers at once with the run
(its row lives in the gateway database). `GET .../runs/{run_id}/join` waits for it and answers
with the thread's final values; `GET .../runs/{run_id}/stream` streams its events from now on
(the run's `stream_mode`s, narrowed by `?stream_mode=`); `POST .../runs/{run_id}/cancel` stops
it (`action=interrupt`; it ends `interrupted` with its completed steps kept).

Differences from LangGraph Server: the run executes in the worker process that accepted it, so
joining its stream and cancelling it work in that process (with several workers, a join or
cancel that reaches another worker waits for the row to finish, or gets 409); there is no
durable queue, so `multitask_strategy: enqueue` and `rollback` are refused (422), and a run
whose worker died is reported `interrupted` (on the next read, and at start-up), never left
`running`. `Last-Event-ID` resumption works while the run is live in the worker that runs it.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import StreamingResponse

from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._errors import BusyError, RequestFieldError
from foldwise.gateway._runs import location, run_json, sse_events, start_run, thread_run
from foldwise.gateway._schemas import SUPPORTED_STREAM_MODES, RunCreate
from foldwise.gateway._serde import JSONResponse, sse_frame
from foldwise.gateway._stream import STREAM_EVENTS
from foldwise.gateway.storage import RunRecord

__all__ = ["router"]

router = APIRouter(tags=["runs"])

_POLL_SECONDS = 0.5
"""How often a join of a run executing in another worker re-reads its row."""


@router.post("/threads/{thread_id}/runs")
async def create_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: RunCreate
) -> Response:
    """Start a run in the background and answer with it (`langgraph_sdk.schema.Run`)."""
    run = await start_run(gateway, thread_id, identity, body, stream=False, background=True)
    record = await gateway.storage.get_run(run.run_id)
    assert record is not None  # created by start_run
    content = run_json(record)
    content["multitask_strategy"] = body.multitask_strategy or "reject"
    return JSONResponse(content, headers=location(run))


async def _finished(gateway: Gateway, record: RunRecord) -> RunRecord:
    """Wait for the run to end (here, or in the worker running it)."""
    active = gateway.runs.active.get(record.run_id)
    if active is not None:
        await active.wait()
    while record.status == "running":
        await asyncio.sleep(_POLL_SECONDS)
        record = await gateway.runs.settle(await gateway.storage.get_run(record.run_id) or record)
    return record


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, run_id: str
) -> Response:
    """Wait for the run to end; answer with the thread's values (like `/runs/wait`)."""
    thread = await require_thread(gateway, thread_id, identity)
    record = await _finished(gateway, await thread_run(gateway, thread_id, run_id))
    graph = gateway.agent_for(thread, assistant_id=_known(gateway, record.assistant_id)).graph
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    values: dict[str, Any] = dict(snapshot.values or {})
    interrupts = list(getattr(snapshot, "interrupts", ()) or ())
    if interrupts:
        values["__interrupt__"] = interrupts
    return JSONResponse(values, headers={"Content-Location": _where(record)})


def _known(gateway: Gateway, assistant_id: str) -> str | None:
    return assistant_id if assistant_id in gateway.agents.assistant_ids else None


def _where(record: RunRecord) -> str:
    return f"/threads/{record.thread_id}/runs/{record.run_id}"


def _wanted(modes: list[str] | None) -> frozenset[str] | None:
    modes = [m for m in modes or () if m]  # the SDK sends `stream_mode=` for "all"
    if not modes:
        return None
    for index, mode in enumerate(modes):
        if mode not in SUPPORTED_STREAM_MODES:
            raise RequestFieldError(f"stream_mode[{index}]", f"unsupported stream mode {mode!r}")
    return frozenset().union(*(STREAM_EVENTS[m] for m in modes))


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    run_id: str,
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """Stream the run's events from now until it ends (only `end` if it already has).

    A run started with `stream_resumable` numbers its events (SSE `id:`); a client that sends
    `Last-Event-ID` first gets the kept events after that one, then the live ones.
    """
    await require_thread(gateway, thread_id, identity)
    record = await thread_run(gateway, thread_id, run_id)
    wanted = _wanted(stream_mode)
    active = gateway.runs.active.get(run_id)
    headers = {"Content-Location": _where(record), "Cache-Control": "no-store"}
    if active is None:
        record = await _finished(gateway, record)
        end = sse_frame("end", {"run_id": run_id, "status": record.status})
        return Response(end, media_type="text/event-stream", headers=headers)
    buffer = gateway.runs.new_buffer(run_id, thread_id)
    after = _event_number(last_event_id)
    if after is not None:
        active.replay(buffer, after, wanted)
    active.attach(buffer, wanted)  # no await since the replay: no event falls in between
    on_disconnect = "cancel" if cancel_on_disconnect else "continue"
    return StreamingResponse(
        sse_events(active, buffer, on_disconnect, metadata=False),
        media_type="text/event-stream",
        headers=headers,
    )


def _event_number(last_event_id: str | None) -> int | None:
    try:
        return None if last_event_id is None else int(last_event_id)
    except ValueError:
        return None  # not one of ours: stream from now


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> Response:
    """Stop the run (`interrupt`: it ends `interrupted`, its completed steps kept).

    `rollback` (delete the run and its checkpoints) is refused with 422. A finished run is
    answered as is.
    """
    await require_thread(gateway, thread_id, identity)
    if action == "rollback":
        raise RequestFieldError(
            "action", "rollback is not supported by the foldwise gateway; use interrupt"
        )
    record = await thread_run(gateway, thread_id, run_id)
    active = gateway.runs.active.get(run_id)
    if active is None and record.status == "running":
        raise BusyError(thread_id, "a run in another gateway worker", 1)
    if active is not None:
        active.cancel()
        if not wait:
            return JSONResponse(run_json(record), status_code=202)
        record = await _finished(gateway, record)
    return JSONResponse(run_json(await thread_run(gateway, thread_id, run_id)))
