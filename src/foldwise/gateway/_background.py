"""Background runs, LangGraph-Server shaped: create, join, join the stream, cancel.

`POST /threads/{id}/runs` starts a run on the `RunManager`, or (`multitask_strategy:
enqueue` on a busy thread) queues it `pending` in the gateway database (`RunQueue`), and
answers at once with the run. `GET .../runs/{run_id}/join` waits for it and answers with the
thread's final values; `GET .../runs/{run_id}/stream` streams its events from now on (a queued
run's from its first one; the run's `stream_mode`s, narrowed by `?stream_mode=`);
`POST .../runs/{run_id}/cancel` stops it (`action=interrupt`: it ends `interrupted` with its
completed steps kept; `action=rollback`: the thread goes back to where the run started and the
run is deleted). Queued runs survive a restart: any worker starts them when the thread is free.

Differences from LangGraph Server: a run executes in one worker process, so joining its stream
live works in that process (a join that reaches another worker waits for the run to end and
gets its `end`); cancelling a run executing in another worker leaves a request in the
database that the executing worker's dispatcher reads within its poll interval (a queued run
is cancelled directly, from any worker). A run whose worker died while it ran ends `error`
("worker died during the run"); one the dead worker had claimed but not started is run
again. A rollback leaves the run's checkpoints in the history as an abandoned branch (the
thread's head is a copy of the checkpoint the run started from) where LangGraph Server deletes
them, and the transcript keeps the run's messages (it is append-only). `Last-Event-ID`
resumption works while the run is live in the worker that runs it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import StreamingResponse

from foldwise.gateway._deps import GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._errors import BusyError, RequestFieldError
from foldwise.gateway._runs import (
    accept_run,
    finished_run,
    location,
    queued_events,
    run_json,
    sse_events,
    thread_run,
    thread_values,
)
from foldwise.gateway._schemas import SUPPORTED_STREAM_MODES, RunCreate
from foldwise.gateway._serde import JSONResponse, sse_frame
from foldwise.gateway._stream import STREAM_EVENTS
from foldwise.gateway.storage import RunRecord

__all__ = ["router"]

router = APIRouter(tags=["runs"])


@router.post("/threads/{thread_id}/runs")
async def create_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: RunCreate
) -> Response:
    """Start a run in the background, or queue it; answer with it (`langgraph_sdk.schema.Run`)."""
    run = await accept_run(gateway, thread_id, identity, body, stream=False, background=True)
    record = run if isinstance(run, RunRecord) else await gateway.storage.get_run(run.run_id)
    assert record is not None  # created by accept_run
    content = run_json(record)
    content["multitask_strategy"] = body.multitask_strategy or "reject"
    return JSONResponse(content, headers=location(run))


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, run_id: str
) -> Response:
    """Wait for the run to end (and to start, if queued); answer with the thread's values."""
    thread = await require_thread(gateway, thread_id, identity)
    record = await finished_run(gateway, await thread_run(gateway, thread_id, run_id))
    values = await thread_values(gateway, thread, record)
    return JSONResponse(values, headers={"Content-Location": _where(record)})


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

    A queued run streams from its first event once it starts. A run started with
    `stream_resumable` numbers its events (SSE `id:`); a client that sends `Last-Event-ID`
    first gets the kept events after that one, then the live ones.
    """
    await require_thread(gateway, thread_id, identity)
    record = await thread_run(gateway, thread_id, run_id)
    wanted = _wanted(stream_mode)
    active = gateway.runs.active.get(run_id)
    headers = {"Content-Location": _where(record), "Cache-Control": "no-store"}
    on_disconnect = "cancel" if cancel_on_disconnect else "continue"
    if active is None and record.status == "pending":
        frames = queued_events(gateway, record, wanted, on_disconnect, metadata=False)
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
    if active is None:
        record = await finished_run(gateway, record)
        end = sse_frame("end", {"run_id": run_id, "status": record.status})
        return Response(end, media_type="text/event-stream", headers=headers)
    buffer = gateway.runs.new_buffer(run_id, thread_id)
    after = _event_number(last_event_id)
    if after is not None:
        active.replay(buffer, after, wanted)
    active.attach(buffer, wanted)  # no await since the replay: no event falls in between
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
    """Stop the run (`interrupt`), or undo it (`rollback`).

    `interrupt` ends it `interrupted` with its completed steps kept; `rollback` puts the thread
    back where the run started and deletes the run. A queued run is cancelled before it
    starts (`rollback`: deleted). A finished run is answered as is. A run executing in another
    worker is stopped by that worker (its dispatcher reads the request from the database).
    """
    await require_thread(gateway, thread_id, identity)
    record = await thread_run(gateway, thread_id, run_id)
    rollback = action == "rollback"
    if record.status == "pending" and await gateway.queue.cancel_pending(record, action):
        return _cancelled(record, rollback, wait)
    active = gateway.runs.active.get(run_id)
    if active is not None:
        active.cancel(rollback=rollback)
    else:
        record = await thread_run(gateway, thread_id, run_id)
        if record.status == "pending":  # claimed by another worker, not started yet
            raise BusyError(thread_id, "a run starting in another gateway worker", 1)
        if record.status != "running" or not await gateway.storage.request_cancel(run_id, action):
            return JSONResponse(run_json(await thread_run(gateway, thread_id, run_id)))
        # Executing in another worker: its dispatcher stops it within a poll interval.
    if not wait:
        return JSONResponse(run_json(record), status_code=202)
    return _cancelled(await finished_run(gateway, record), rollback, wait)


def _cancelled(record: RunRecord, rollback: bool, wait: bool) -> Response:
    """The answer to a cancel: the run as it ended (a rolled-back run reads `interrupted`)."""
    content = run_json(record)
    if rollback or record.status == "pending":
        content["status"] = "interrupted"
    return JSONResponse(content, status_code=200 if wait else 202)
