"""Run routes, LangGraph-Server shaped: `/runs/wait`, `/runs/stream` (SSE), run records.

Both create a run on the thread (one at a time: a second gets 409 with `Retry-After`), record
the input in the transcript, and execute the agent in the background. `/runs/wait` answers
with the final state values; `/runs/stream` sends Server-Sent Events: `metadata` first, then
one event per chunk of each requested mode (`values`, `updates`, `messages` for
`messages-tuple`, `messages/metadata|partial|complete` for the legacy `messages`, `custom`,
`debug`, `tasks`, `checkpoints`, `events`; `mode|namespace` for subgraphs with
`stream_subgraphs`), `error` if the run failed, and `end`. The summarizer's tokens never
appear: its calls are tagged `nostream`, and chunks tagged `foldwise:summarize` are dropped.

Slow clients: the run never waits for its streaming client. Each stream buffers at most
`stream_buffer_events` frames / `stream_buffer_bytes` bytes (`create_app` options; 4096 and
32 MiB by default). A client that falls further behind (a `messages-tuple` stream read slowly,
or not at all) gets its unread frames dropped and one `error` event, `StreamOverflowError`,
that names the run; the stream ends there. The run goes on and finishes as usual: its status
is at `GET /threads/{id}/runs/{run_id}` (also in the `Content-Location` header) and its result
in `GET /threads/{id}/state`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from foldwise.errors import ThreadNotFoundError
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._errors import (
    BusyError,
    RunFailedError,
    RunInterruptedError,
    RunNotFoundError,
)
from foldwise.gateway._inputs import checked_goto, parse_run_input
from foldwise.gateway._manager import ActiveRun, RunSpec
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import OffsetQuery, PageQuery, RunCreate
from foldwise.gateway._serde import JSONResponse, sse_frame
from foldwise.gateway._stream import EventBuffer
from foldwise.gateway._tenancy import memory_user_id
from foldwise.gateway.storage import RunRecord, ThreadExistsError, ThreadRecord, validate_run_id

__all__ = [
    "accept_run",
    "finished_run",
    "location",
    "queued_events",
    "router",
    "run_json",
    "sse_events",
    "started",
    "thread_run",
    "thread_values",
]

router = APIRouter(tags=["runs"])

SSE_HEARTBEAT_SECONDS = 10.0
"""An SSE comment is sent when a run has been silent this long (keeps proxies from timing out)."""


async def accept_run(
    gateway: Gateway,
    thread_id: str,
    identity: str,
    body: RunCreate,
    *,
    stream: bool,
    background: bool = False,
) -> ActiveRun | RunRecord:
    """Validate a run body and start the run on the thread, or queue it (`enqueue`).

    Args:
        gateway: The gateway.
        thread_id: The thread (created first, owned by `identity`, if `if_not_exists: "create"`).
        identity: The caller; another identity's thread is not found (404).
        body: The request body.
        stream: The caller streams the run (a buffer is made for it).
        background: A background run: it streams its modes to clients that join it.

    Raises:
        RequestFieldError: An invalid or unsupported field (422).
        BusyError: The thread is busy and `multitask_strategy` is not `enqueue` (409).

    Returns:
        The started run, or the `pending` row of a queued one.
    """
    body.check_supported()
    modes = body.stream_modes()  # validated for /runs/wait too, where it is not used
    if not (stream or background):
        modes = []
    check_values(body.metadata, "metadata")
    model_name, model_field = body.requested_model()
    gateway.agents.resolve(body.assistant_id, model_name, field=model_field)
    parsed = parse_run_input(body.input, body.command, body.checkpoint, body.checkpoint_id)
    record = await gateway.storage.get_thread(thread_id, owner=identity)
    if record is None:
        if body.if_not_exists != "create":
            raise ThreadNotFoundError(thread_id)
        with contextlib.suppress(ThreadExistsError):
            await gateway.storage.create_thread(thread_id, {}, owner=identity)
        await require_thread(gateway, thread_id, identity)  # taken meanwhile, maybe by another
    hosted = gateway.agents.get(body.assistant_id, model_name)
    spec = RunSpec(
        thread_id=thread_id,
        assistant_id=body.assistant_id,
        model_name=model_name,
        hosted=hosted,
        messages=parsed.messages,
        command=checked_goto(parsed.command, list(hosted.graph.nodes)),
        checkpoint_id=parsed.checkpoint_id,
        stream_subgraphs=body.stream_subgraphs,
        resumable=body.stream_resumable,
        stream_modes=modes,
        durability=body.durability,
        recursion_limit=body.recursion_limit(),
        metadata=body.metadata,
        user_id=memory_user_id(identity),
    )
    return await gateway.queue.submit(
        spec, strategy=body.multitask_strategy, stream=stream, waiter=not background
    )


def started(run: ActiveRun | RunRecord) -> ActiveRun:
    """`accept_run`'s result for a run that cannot be queued (a stateless run's new thread)."""
    if isinstance(run, RunRecord):  # pragma: no cover - a new thread is never busy
        raise BusyError(run.thread_id, "a queued run", 1)
    return run


def location(run: ActiveRun | RunRecord) -> dict[str, str]:
    """The `Content-Location` header naming a run."""
    return {"Content-Location": f"/threads/{run.thread_id}/runs/{run.run_id}"}


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: RunCreate
) -> Response:
    """Run the agent on the thread and answer with the final state values.

    A failed run answers with the error's status and `{detail}` naming the run.
    """
    run = await accept_run(gateway, thread_id, identity, body, stream=False)
    if isinstance(run, RunRecord):  # queued: wait for its turn
        started = await gateway.queue.wait_started(run.run_id)
        # A run that started and ended here before this waiter looked answers with its own
        # final values: the thread's current values may already hold the runs queued after it.
        run = started or gateway.runs.recent.get(run.run_id) or run
    if isinstance(run, RunRecord):  # it ran in another worker (or was cancelled)
        record = await finished_run(gateway, run)
        if record.status == "error":
            raise RunFailedError(record.run_id, RuntimeError(record.error or "unknown error"))
        if record.status == "interrupted" and record.error:
            raise RunInterruptedError(record.run_id)
        thread = await require_thread(gateway, thread_id, identity)
        values = await thread_values(gateway, thread, record, of_run=record.status == "success")
        return JSONResponse(values, headers=location(run))
    await run.wait()
    error = run.outcome_error()
    if error is not None:
        raise error
    return JSONResponse(run.final_values or {}, headers=location(run))


_POLL_SECONDS = 0.5
"""How often a wait for a run executing in another worker re-reads its row."""


async def finished_run(gateway: Gateway, record: RunRecord) -> RunRecord:
    """Wait for the run to end (here, or in the worker running it); its final row.

    A rolled-back run has no row any more: it reads `interrupted`.
    """
    while True:
        active = gateway.runs.active.get(record.run_id)
        if active is not None:
            await active.wait()
        elif record.status not in ("pending", "running"):
            return record
        else:
            await asyncio.sleep(_POLL_SECONDS)
        fresh = await gateway.storage.get_run(record.run_id)
        if fresh is None:
            return replace(record, status="interrupted", error=None)
        record = await gateway.queue.settle(fresh)


async def thread_values(
    gateway: Gateway, thread: ThreadRecord, record: RunRecord, *, of_run: bool = False
) -> Any:
    """The thread's current values, with `__interrupt__` when it waits at an interrupt.

    With `of_run`, the values of the last checkpoint `record`'s run wrote (its checkpoints
    carry its run id in their metadata), so a waiter in another worker than the one that ran
    it gets this run's answer even when runs queued after it have run since; the thread's
    current values when the run wrote none.
    """
    assistant_id = record.assistant_id
    known = assistant_id if assistant_id in gateway.agents.assistant_ids else None
    graph = gateway.agent_for(thread, assistant_id=known).graph
    config: Any = {"configurable": {"thread_id": thread.thread_id}}
    snapshot = None
    if of_run:
        history = graph.aget_state_history(config, filter={"run_id": record.run_id}, limit=1)
        async with contextlib.aclosing(history) as newest_first:
            snapshot = await anext(newest_first, None)
    if snapshot is None:
        snapshot = await graph.aget_state(config)
    values: dict[str, Any] = dict(snapshot.values or {})
    interrupts = list(getattr(snapshot, "interrupts", ()) or ())
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


async def sse_events(
    run: ActiveRun, buffer: EventBuffer, on_disconnect: str, *, metadata: bool = True
) -> AsyncIterator[bytes]:
    """A run's SSE frames from `buffer` (after a `metadata` event), with heartbeats.

    A client that goes away stops receiving; with `on_disconnect="cancel"` the run stops too.
    """
    finished = False
    try:
        if metadata:
            yield sse_frame(
                "metadata", {"run_id": run.run_id, "thread_id": run.thread_id, "attempt": 1}
            )
        while True:
            try:
                frame = await asyncio.wait_for(buffer.get(), SSE_HEARTBEAT_SECONDS)
            except TimeoutError:
                yield b": heartbeat\n\n"
                continue
            if frame is None:
                # Ended by the run, or early because this client fell too far behind (an
                # `error` event said so): either way the run is not this client's to cancel.
                finished = True
                return
            yield frame
    finally:
        if not finished:
            run.detach()
            run.unattach(buffer)
            if on_disconnect == "cancel":
                run.cancel()


def queued_events(
    gateway: Gateway,
    record: RunRecord,
    events: frozenset[str] | None,
    on_disconnect: str,
    *,
    metadata: bool = True,
) -> AsyncIterator[bytes]:
    """A queued run's SSE frames: heartbeats while it waits, then its events as it runs here.

    If it runs in another worker, or is cancelled before it starts, the stream is its `end`.
    A client that goes away while it waits cancels it with `on_disconnect="cancel"`. The
    subscription is made now, not when the response starts: a run that starts and ends in
    between would otherwise stream only its `end`.
    """
    buffer = gateway.runs.new_buffer(record.run_id, record.thread_id)
    gateway.queue.subscribe(record.run_id, buffer, events)
    return _queued_frames(gateway, record, buffer, events, on_disconnect, metadata)


async def _queued_frames(
    gateway: Gateway,
    record: RunRecord,
    buffer: EventBuffer,
    events: frozenset[str] | None,
    on_disconnect: str,
    metadata: bool,
) -> AsyncIterator[bytes]:
    waiting = asyncio.ensure_future(gateway.queue.wait_started(record.run_id))
    try:
        if metadata:
            yield sse_frame(
                "metadata", {"run_id": record.run_id, "thread_id": record.thread_id, "attempt": 1}
            )
        while not (await asyncio.wait({waiting}, timeout=SSE_HEARTBEAT_SECONDS))[0]:
            yield b": heartbeat\n\n"
    finally:
        gateway.queue.unsubscribe(record.run_id, buffer)
        if not waiting.done():
            waiting.cancel()
            if on_disconnect == "cancel":
                gateway.queue.drop_pending(record)
    active = waiting.result()
    ran_here = gateway.runs.recent.get(record.run_id)
    if active is None and ran_here is not None and any(b is buffer for b, _ in ran_here.listeners):
        active = ran_here  # it started and ended here before this waiter looked: in `buffer`
    if active is None:
        record = await finished_run(gateway, record)
        yield sse_frame("end", {"run_id": record.run_id, "status": record.status})
        return
    if all(b is not buffer for b, _ in active.listeners):  # claimed before we subscribed
        if active.spec.resumable:
            active.replay(buffer, 0, events)
        active.attach(buffer, events)
    async for frame in sse_events(active, buffer, on_disconnect, metadata=False):
        yield frame


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: RunCreate
) -> Response:
    """Run the agent on the thread and stream its progress as Server-Sent Events.

    If the client disconnects the run continues (`on_disconnect: "continue"`, the default) or is
    cancelled (`"cancel"`); either way the thread stays consistent.
    """
    run = await accept_run(gateway, thread_id, identity, body, stream=True)
    headers = {**location(run), "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    on_disconnect = body.on_disconnect or "continue"
    if isinstance(run, RunRecord):  # queued behind the thread's current run
        frames = queued_events(gateway, run, None, on_disconnect)
    else:
        assert run.queue is not None
        frames = sse_events(run, run.queue, on_disconnect)
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)


def run_json(record: RunRecord) -> dict[str, Any]:
    """A run as LangGraph Server returns it (`langgraph_sdk.schema.Run`)."""
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "assistant_id": record.assistant_id,
        "kind": record.kind,
        "status": record.status,
        "error": record.error,
        "metadata": record.metadata,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "multitask_strategy": "reject",
    }


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    limit: PageQuery = 10,
    offset: OffsetQuery = 0,
) -> Response:
    """The thread's runs and manual compactions, newest first."""
    await require_thread(gateway, thread_id, identity)
    records = await gateway.storage.list_runs(thread_id, limit=limit, offset=offset)
    return JSONResponse([run_json(r) for r in records])


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, run_id: str
) -> Response:
    """One run of the thread."""
    validate_run_id(run_id)
    await require_thread(gateway, thread_id, identity)
    return JSONResponse(run_json(await thread_run(gateway, thread_id, run_id)))


async def thread_run(gateway: Gateway, thread_id: str, run_id: str) -> RunRecord:
    """The run's record, settled (a dead worker's run reads `interrupted`, not `running`).

    The caller has checked the thread (`require_thread`).

    Raises:
        RunNotFoundError: No such run on this thread (404).
    """
    validate_run_id(run_id)
    record = await gateway.storage.get_run(run_id)
    if record is None or record.thread_id != thread_id:
        raise RunNotFoundError(run_id)
    return await gateway.queue.settle(record)
