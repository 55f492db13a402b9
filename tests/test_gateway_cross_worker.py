"""Two workers on one database: cancels across workers, and who starts a queued run.

Two in-process gateways on one database stand for two workers (`tests/test_multiworker_pg.py`
does the same with `foldwise serve --workers 2`). The run executes in worker A; the cancel, or a
run with `multitask_strategy: interrupt`, reaches worker B, which leaves a request in
`run_cancels`; A's dispatcher reads it and stops the run as if it had been asked directly. A
run queued through B by a client that streams it is started by B, where the stream is, even
though A (whose run just ended) looks at the queue first.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from langgraph_sdk.client import LangGraphClient

from foldwise.gateway.storage import open_storage
from tests.support.gateway import Gate, user
from tests.test_gateway_background_runs import contents, gated, sdk_gateway, until

_FAST = {"queue_poll_seconds": 0.05}


@dataclass
class _Pair:
    """Two gateways (workers A and B) on one database, their SDK clients and the model's gate."""

    gate: Gate
    a: LangGraphClient
    b: LangGraphClient
    app_a: FastAPI
    app_b: FastAPI


@asynccontextmanager
async def _two_workers(tmp_path: Path, storage_url: str) -> AsyncIterator[_Pair]:
    """Two gateways on `storage_url`; the model's first call waits for the gate."""
    gate = Gate()
    model = gated(gate)
    async with (
        sdk_gateway(tmp_path, model, storage_url, **_FAST) as (a, app_a),
        sdk_gateway(tmp_path, model, storage_url, **_FAST) as (b, app_b),
    ):
        try:
            yield _Pair(gate, a, b, app_a, app_b)
        finally:
            gate.release()  # a failing test must not leave the model blocked


async def test_cancel_requests_on_both_databases(storage_url: str) -> None:
    async with open_storage(storage_url) as storage:
        await storage.create_thread("t")
        running, pending, done = (str(uuid.uuid4()) for _ in range(3))
        await storage.create_run("t", running, "agent", "run")
        await storage.enqueue_run("t", pending, "agent", {})
        await storage.create_run("t", done, "agent", "run")
        await storage.finish_run(done, "success")
        assert await storage.request_cancel(running, "rollback")
        assert await storage.request_cancel(running, "interrupt")  # already asked: kept
        assert not await storage.request_cancel(pending, "interrupt")  # not started
        assert not await storage.request_cancel(done, "interrupt")
        assert not await storage.request_cancel(str(uuid.uuid4()), "interrupt")
        with pytest.raises(ValueError, match="action"):
            await storage.request_cancel(running, "stop")
        assert await storage.take_cancel_requests([]) == {}
        assert await storage.take_cancel_requests([done, pending]) == {}
        assert await storage.take_cancel_requests([running, done]) == {running: "rollback"}
        assert await storage.take_cancel_requests([running]) == {}  # taken once


async def test_requests_of_runs_that_ended_unread_do_not_pile_up(storage_url: str) -> None:
    """A cancel that races the run's end is never read; the next request drops it."""
    async with open_storage(storage_url) as storage:
        await storage.create_thread("t")
        ended, running = str(uuid.uuid4()), str(uuid.uuid4())
        await storage.create_run("t", ended, "agent", "run")
        assert await storage.request_cancel(ended, "interrupt")
        await storage.finish_run(ended, "success")  # before its worker read the request
        await storage.create_run("t", running, "agent", "run")
        assert await storage.request_cancel(running, "interrupt")
        assert await storage.take_cancel_requests([ended, running]) == {running: "interrupt"}
        assert not await storage.request_cancel(ended, "interrupt")


async def test_a_run_in_another_worker_is_cancelled(tmp_path: Path, storage_url: str) -> None:
    async with _two_workers(tmp_path, storage_url) as pair:
        gate, a, b = pair.gate, pair.a, pair.b
        thread = (await a.threads.create())["thread_id"]
        run = await a.runs.create(thread, "agent", input=user("hold"))
        await gate.wait_entered()
        assert run["run_id"] in pair.app_a.state.gateway.runs.active
        assert run["run_id"] not in pair.app_b.state.gateway.runs.active
        accepted = await b.runs.cancel(thread, run["run_id"])
        assert accepted["status"] == "running"  # 202: worker A stops it
        try:
            assert await _final(b, thread, run["run_id"]) == "interrupted"
        finally:
            gate.release()
        finished = await b.runs.join(thread, run["run_id"])
        assert contents(finished) == ["hold"]  # stopped in the model call: no answer kept
        await until(lambda: not pair.app_a.state.gateway.runs.active)
        values = await b.runs.wait(thread, "agent", input=user("next"))
        assert contents(values)[-1] == "answer 2 to next"


async def test_interrupt_strategy_stops_a_run_in_another_worker(
    tmp_path: Path, storage_url: str
) -> None:
    async with _two_workers(tmp_path, storage_url) as pair:
        gate, a, b = pair.gate, pair.a, pair.b
        thread = (await a.threads.create())["thread_id"]
        first = await a.runs.create(thread, "agent", input=user("hold"))
        await gate.wait_entered()
        instead = asyncio.create_task(
            b.runs.wait(thread, "agent", input=user("instead"), multitask_strategy="interrupt")
        )
        try:
            # B's run starts only once A's run has stopped, inside its (still blocked) model call.
            assert (await _final(a, thread, first["run_id"])) == "interrupted"
            values = await asyncio.wait_for(instead, 30)
        finally:
            gate.release()
        assert contents(values) == ["hold", "instead", "answer 2 to instead"]


async def _final(client: Any, thread: str, run_id: str) -> str:
    for _ in range(400):
        status = str((await client.runs.get(thread, run_id))["status"])
        if status not in ("pending", "running"):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never finished")


async def test_a_queued_streamed_run_starts_where_its_client_waits(
    tmp_path: Path, storage_url: str
) -> None:
    async with _two_workers(tmp_path, storage_url) as pair:
        gate, a, b = pair.gate, pair.a, pair.b
        thread = (await a.threads.create())["thread_id"]
        await a.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()

        async def stream() -> list[tuple[str, Any]]:
            parts = b.runs.stream(
                thread, "agent", input=user("streamed"), multitask_strategy="enqueue"
            )
            return [(p.event, p.data) async for p in parts]

        streamed = asyncio.create_task(stream())
        for _ in range(400):
            if len(await a.runs.list(thread)) == 2:
                break
            await asyncio.sleep(0.05)
        gate.release()  # A's run ends: A's dispatcher looks first, and leaves the run to B
        events = await asyncio.wait_for(streamed, 30)
        names = [name for name, _ in events]
        assert names[0] == "metadata" and names[-1] == "end", names
        answers = [data for name, data in events if name == "values"]
        assert answers and contents(answers[-1])[-1] == "answer 2 to streamed", events
        run_id = events[0][1]["run_id"]
        assert run_id in pair.app_b.state.gateway.runs.recent  # it ran in B
        assert run_id not in pair.app_a.state.gateway.runs.recent


async def test_interrupt_from_another_worker_cancels_the_queued_runs_first(
    tmp_path: Path, storage_url: str
) -> None:
    """Else worker A starts the queued run as soon as it stopped its running one: B got 409."""
    async with _two_workers(tmp_path, storage_url) as pair:
        gate, a, b = pair.gate, pair.a, pair.b
        thread = (await a.threads.create())["thread_id"]
        first = await a.runs.create(thread, "agent", input=user("hold"))
        await gate.wait_entered()
        queued = await a.runs.create(
            thread, "agent", input=user("queued"), multitask_strategy="enqueue"
        )
        assert queued["status"] == "pending"
        instead = asyncio.create_task(
            b.runs.wait(thread, "agent", input=user("instead"), multitask_strategy="interrupt")
        )
        try:
            assert await _final(a, thread, first["run_id"]) == "interrupted"
            values = await asyncio.wait_for(instead, 30)
        finally:
            gate.release()
        assert await _final(a, thread, queued["run_id"]) == "interrupted"  # never ran
        assert contents(values) == ["hold", "instead", "answer 2 to instead"]
