"""Stateless runs, LangGraph-Server shaped: `POST /runs`, `/runs/wait`, `/runs/stream`.

`POST /runs/batch` starts several background runs at once: each item is a run body, with a
`thread_id` to run on that thread, without one to run stateless; items start in order, and
the first invalid one answers 422 (naming `[index].field`), the ones before it running on.

Each stateless run runs on a new ephemeral thread, which is deleted (checkpoints, transcript, runs,
artifacts) once the run ends, unless the body says `on_completion: "keep"`; the run's
`thread_id` (in the `metadata` event, the run object and `Content-Location`) then names it.
`/runs/wait` deletes before it answers; the others delete in the background after the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Response
from fastapi.responses import StreamingResponse

from foldwise.errors import FoldwiseError
from foldwise.gateway._active import ActiveRun
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep, require_thread
from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._runs import accept_run, location, run_json, sse_events, started
from foldwise.gateway._schemas import RunCreate
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import validate_thread_id

__all__ = ["MAX_BATCH", "BatchRunCreate", "router"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["runs"])

_cleanups: set[asyncio.Task[None]] = set()  # referenced until done (asyncio keeps weak refs)


async def _start(
    gateway: Gateway, identity: str, body: RunCreate, *, stream: bool, background: bool
) -> ActiveRun:
    thread_id = str(uuid.uuid4())
    await gateway.storage.create_thread(thread_id, {}, owner=identity)
    try:
        run = await accept_run(
            gateway, thread_id, identity, body, stream=stream, background=background
        )
        return started(run)
    except BaseException:
        await _delete(gateway, thread_id)
        raise


async def _delete(gateway: Gateway, thread_id: str) -> None:
    """Delete an ephemeral thread with everything in it (logged, never raised)."""
    try:
        async with gateway.runs.exclusive(thread_id, "delete"):
            for store in gateway.agents.artifact_stores():
                await store.adelete_thread(thread_id)
            await gateway.checkpointer.adelete_thread(thread_id)
            await gateway.storage.delete_thread(thread_id)
    except FoldwiseError:
        logger.exception("could not delete the ephemeral thread %s", thread_id)


async def _after(gateway: Gateway, run: ActiveRun, body: RunCreate) -> None:
    with contextlib.suppress(BaseException):
        await run.wait()
    if body.on_completion != "keep":
        await _delete(gateway, run.thread_id)


def _cleanup_later(gateway: Gateway, run: ActiveRun, body: RunCreate) -> None:
    task = asyncio.create_task(_after(gateway, run, body))
    _cleanups.add(task)
    task.add_done_callback(_cleanups.discard)


@router.post("/runs/wait")
async def stateless_wait(gateway: GatewayDep, identity: IdentityDep, body: RunCreate) -> Response:
    """Run the agent on a new thread; answer with its final values."""
    run = await _start(gateway, identity, body, stream=False, background=False)
    await _after(gateway, run, body)
    error = run.outcome_error()
    if error is not None:
        raise error
    return JSONResponse(run.final_values or {}, headers=location(run))


@router.post("/runs/stream")
async def stateless_stream(gateway: GatewayDep, identity: IdentityDep, body: RunCreate) -> Response:
    """Run the agent on a new thread and stream it (Server-Sent Events)."""
    run = await _start(gateway, identity, body, stream=True, background=False)
    _cleanup_later(gateway, run, body)
    assert run.queue is not None
    headers = {**location(run), "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(
        sse_events(run, run.queue, body.on_disconnect or "continue"),
        media_type="text/event-stream",
        headers=headers,
    )


@router.post("/runs")
async def stateless_create(gateway: GatewayDep, identity: IdentityDep, body: RunCreate) -> Response:
    """Start a run on a new thread in the background; answer with the run."""
    run = await _start(gateway, identity, body, stream=False, background=True)
    record = await gateway.storage.get_run(run.run_id)
    assert record is not None  # created by accept_run
    _cleanup_later(gateway, run, body)
    return JSONResponse(run_json(record), headers=location(run))


class BatchRunCreate(RunCreate):
    """One item of `POST /runs/batch`: a run body, with the thread to run on (or none)."""

    thread_id: str | None = None


MAX_BATCH = 100
"""Most runs one `POST /runs/batch` starts."""


async def _start_item(gateway: Gateway, identity: str, body: BatchRunCreate) -> ActiveRun:
    if body.thread_id is None:
        run = await _start(gateway, identity, body, stream=False, background=True)
        _cleanup_later(gateway, run, body)
        return run
    try:
        thread_id = validate_thread_id(body.thread_id)
    except ValueError as error:
        raise RequestFieldError("thread_id", str(error)) from None
    await require_thread(gateway, thread_id, identity)
    return started(
        await accept_run(gateway, thread_id, identity, body, stream=False, background=True)
    )


@router.post("/runs/batch")
async def batch_create(
    gateway: GatewayDep,
    identity: IdentityDep,
    bodies: Annotated[list[BatchRunCreate], Body(max_length=MAX_BATCH)],
) -> Response:
    """Start several background runs; answer with them, in order."""
    runs = []
    for index, body in enumerate(bodies):
        try:
            run = await _start_item(gateway, identity, body)
        except RequestFieldError as error:
            reason = str(error).removeprefix(f"{error.field}: ")
            raise RequestFieldError(f"[{index}].{error.field}", reason) from None
        record = await gateway.storage.get_run(run.run_id)
        assert record is not None  # created by accept_run
        runs.append(run_json(record))
    return JSONResponse(runs)
