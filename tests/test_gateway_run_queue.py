"""The durable run queue: `enqueue`, `rollback`, cancel of queued runs, dead workers' runs.

Driven with the official `langgraph_sdk` against an in-process gateway; the storage-level
claim rules run on SQLite and (marked `postgres`) PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from foldwise.gateway._active import RunSpec
from foldwise.gateway._agents import HostedAgent
from foldwise.gateway._queue import run_request, spec_from_request
from foldwise.gateway._runs import queued_events, sse_events
from foldwise.gateway.storage import RunRecord, open_storage
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, user
from tests.test_gateway_background_runs import contents, gated, sdk_gateway


@pytest.fixture(autouse=True)
async def _asyncio_debug() -> None:
    """Every test here runs with asyncio debug on (never-awaited coroutines, slow callbacks)."""
    asyncio.get_running_loop().set_debug(True)


NOW = datetime.now(UTC)


async def _status(client: Any, thread: str, run_id: str) -> str:
    return str((await client.runs.get(thread, run_id))["status"])


async def _transcript(client: Any, thread: str) -> list[str]:
    page = await client.http.get(f"/threads/{thread}/transcript", params={"limit": 1000})
    return [str(e["message"]["content"]) for e in page["entries"]]


async def test_enqueued_runs_wait_their_turn_in_order(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()
        second = await client.runs.create(
            thread, "agent", input=user("second"), multitask_strategy="enqueue"
        )
        third = await client.runs.create(
            thread, "agent", input=user("third"), multitask_strategy="enqueue"
        )
        assert second["status"] == third["status"] == "pending"
        assert second["multitask_strategy"] == "enqueue"
        # Accepted means recorded: both inputs are in the transcript before they run.
        assert await _transcript(client, thread) == ["first", "second", "third"]
        assert await _status(client, thread, third["run_id"]) == "pending"
        # `reject` while runs are queued is still 409.
        with pytest.raises(httpx.HTTPStatusError) as busy:
            await client.runs.create(thread, "agent", input=user("no"))
        assert busy.value.response.status_code == 409
        gate.release()
        values = await client.runs.join(thread, third["run_id"])
        assert contents(values) == [
            "first",
            "answer 1 to first",
            "second",
            "answer 2 to second",
            "third",
            "answer 3 to third",
        ]
        for run in (first, second, third):
            assert await _status(client, thread, run["run_id"]) == "success"
        assert (await client.threads.get(thread))["status"] == "idle"
        # Inputs in the order they were accepted, each once; answers as they came.
        assert await _transcript(client, thread) == [
            "first",
            "second",
            "third",
            "answer 1 to first",
            "answer 2 to second",
            "answer 3 to third",
        ]


async def test_wait_and_stream_with_enqueue(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()

        async def stream() -> list[tuple[str, Any]]:
            parts = client.runs.stream(
                thread, "agent", input=user("streamed"), multitask_strategy="enqueue"
            )
            return [(p.event, p.data) async for p in parts]

        waited = asyncio.create_task(
            client.runs.wait(thread, "agent", input=user("waited"), multitask_strategy="enqueue")
        )
        for _ in range(400):  # queued first, so it runs first
            if len(await client.runs.list(thread)) == 2:
                break
            await asyncio.sleep(0.05)
        streamed = asyncio.create_task(stream())
        await asyncio.sleep(0.3)
        assert not waited.done() and not streamed.done()
        gate.release()
        values = await waited
        assert contents(values)[-2:] == ["waited", "answer 2 to waited"]
        events = await streamed
        names = [name for name, _ in events]
        assert names[0] == "metadata" and names[-1] == "end"
        # The queued stream saw the run from its first event: the input, then the answer.
        first_values = next(data for name, data in events if name == "values")
        assert contents(first_values)[-1] == "streamed"
        assert contents(events[-2][1])[-1] == "answer 3 to streamed"


async def test_join_stream_of_a_queued_run_starts_at_its_first_event(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()
        queued = await client.runs.create(
            thread, "agent", input=user("next"), multitask_strategy="enqueue"
        )

        async def join() -> list[tuple[str, Any]]:
            parts = client.runs.join_stream(thread, queued["run_id"])
            return [(p.event, p.data) async for p in parts]

        joined = asyncio.create_task(join())
        await asyncio.sleep(0.2)
        gate.release()
        events = await joined
        values = [data for name, data in events if name == "values"]
        assert contents(values[0])[-1] == "next"
        assert contents(values[-1])[-1] == "answer 2 to next"
        assert events[-1] == ("end", {"run_id": queued["run_id"], "status": "success"})


async def test_cancel_a_queued_run(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()
        kept, dropped = [
            await client.runs.create(thread, "agent", input=user(t), multitask_strategy="enqueue")
            for t in ("kept", "dropped")
        ]
        cancelled = await client.runs.cancel(thread, kept["run_id"], wait=True)
        assert cancelled["status"] == "interrupted"
        await client.runs.cancel(thread, dropped["run_id"], action="rollback")
        with pytest.raises(httpx.HTTPStatusError) as gone:
            await client.runs.get(thread, dropped["run_id"])
        assert gone.value.response.status_code == 404
        gate.release()
        values = await client.runs.join(thread, first["run_id"])
        await asyncio.sleep(0.2)  # nothing queued is left to run
        assert contents(values) == ["first", "answer 1 to first"]
        assert await _status(client, thread, kept["run_id"]) == "interrupted"
        state = await client.threads.get_state(thread)
        assert contents(state["values"]) == ["first", "answer 1 to first"]
        # The transcript is append-only: both accepted inputs stay in it.
        assert await _transcript(client, thread) == [
            "first",
            "kept",
            "dropped",
            "answer 1 to first",
        ]


async def test_rollback_returns_the_thread_to_where_the_run_started(tmp_path: Path) -> None:
    calls = 0
    gate = Gate()

    def brain(messages: list[BaseMessage]) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            gate.block()
        return f"answer {calls} to {messages[-1].content}"

    async with sdk_gateway(tmp_path, ScriptedChatModel(default=brain)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("before"))
        doomed = await client.runs.create(thread, "agent", input=user("doomed"))
        await gate.wait_entered()
        values = await client.runs.wait(
            thread, "agent", input=user("instead"), multitask_strategy="rollback"
        )
        gate.release()
        assert contents(values) == [
            "before",
            "answer 1 to before",
            "instead",
            "answer 3 to instead",
        ]
        with pytest.raises(httpx.HTTPStatusError) as gone:
            await client.runs.get(thread, doomed["run_id"])
        assert gone.value.response.status_code == 404
        assert len(await client.runs.list(thread)) == 2
        assert "doomed" in await _transcript(client, thread)  # append-only


async def test_cancel_rollback_of_a_first_run_empties_the_thread(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "agent", input=user("undo me"))
        await gate.wait_entered()
        await client.runs.cancel(thread, run["run_id"], wait=True, action="rollback")
        gate.release()
        state = await client.threads.get_state(thread)
        assert not state["values"] and state["checkpoint"]["checkpoint_id"] is None
        assert (await client.threads.get(thread))["status"] == "idle"
        values = await client.runs.wait(thread, "agent", input=user("fresh"))
        assert contents(values) == ["fresh", "answer 2 to fresh"]


async def test_a_dead_workers_queue_is_run_by_the_next_worker(
    tmp_path: Path, storage_url: str
) -> None:
    model = ScriptedChatModel(default=lambda m: f"re: {m[-1].content}")
    async with sdk_gateway(tmp_path, model, storage_url) as (client, app):
        thread = (await client.threads.create())["thread_id"]
        gateway = app.state.gateway
        await gateway.queue.stop()  # this worker "dies": nothing dispatches from here on
        storage = gateway.storage
        # What a killed worker leaves: a run it was executing, a busy thread, a run it had
        # claimed (lease taken with its id) but not started, and a run still waiting.
        dead = str(uuid.uuid4())
        await storage.create_run(thread, dead, "agent", "run")
        await storage.update_thread(thread, status="busy")
        claimed, waiting = str(uuid.uuid4()), str(uuid.uuid4())
        for run_id, text in ((claimed, "claimed"), (waiting, "waiting")):
            request = _request(text)
            await storage.enqueue_run(thread, run_id, "agent", request)
        await storage.acquire_thread_lease(thread, claimed, "run", 0.05)
        await asyncio.sleep(0.1)  # its lease lapses
    async with sdk_gateway(tmp_path, model, storage_url) as (client, app):
        values = await client.runs.join(thread, waiting)
        assert contents(values) == ["claimed", "re: claimed", "waiting", "re: waiting"]
        assert await _status(client, thread, claimed) == "success"
        dead_row = await client.runs.get(thread, dead)
        assert dead_row["status"] == "error" and dead_row["error"] == "worker died during the run"
        assert (await client.threads.get(thread))["status"] == "idle"


def _request(text: str) -> dict[str, Any]:
    message = HumanMessage(text, id=str(uuid.uuid4()))
    spec = RunSpec("t", "agent", None, HostedAgent(graph=None), [message])
    return run_request(spec)


def test_a_queued_request_keeps_everything_the_run_needs() -> None:
    message = HumanMessage("hi", id="m1")
    spec = RunSpec(
        "t",
        "agent",
        "other-model",
        HostedAgent(graph=None),
        [message],
        stream_modes=["values", "updates"],
        durability="sync",
        recursion_limit=7,
        metadata={"k": 1},
        command={"resume": {"ok": True}, "goto": "model"},
        checkpoint_id="c1",
        stream_subgraphs=True,
        resumable=True,
        user_id="alice",
    )
    record = RunRecord("r", "t", "agent", "run", "pending", None, {"k": 1}, NOW, NOW)
    rebuilt = spec_from_request(record, run_request(spec), lambda a, m: spec.hosted)
    assert rebuilt == spec


async def test_queue_claims_on_both_databases(storage_url: str) -> None:
    async with open_storage(storage_url) as storage:
        await storage.create_thread("q")
        ids = [str(uuid.uuid4()) for _ in range(3)]
        for run_id in ids:
            await storage.enqueue_run("q", run_id, "agent", {"n": run_id})
        assert [r.run_id for r in await storage.thread_pending_runs("q")] == ids
        assert [r.run_id for r in await storage.pending_runs()] == ids[:1]  # next per thread
        assert await storage.queued_request(ids[0]) == {"n": ids[0]}
        # Two claimers race for the same run: exactly one moves it to running.
        results = await asyncio.gather(*(storage.start_pending_run(ids[0]) for _ in range(4)))
        assert sorted(results) == [False, False, False, True]
        assert await storage.queued_request(ids[0]) is None
        # A cancel loses against a started run, and wins against a pending one.
        assert not await storage.cancel_pending_run(ids[0], "too late")
        assert await storage.cancel_pending_run(ids[1], "cancelled")
        assert not await storage.start_pending_run(ids[1])
        assert not await storage.delete_run(ids[0], thread_id="q", pending_only=True)
        assert await storage.delete_run(ids[2], thread_id="q", pending_only=True)
        assert await storage.thread_pending_runs("q") == []
        statuses = {r.run_id: r.status for r in await storage.list_runs("q")}
        assert statuses == {ids[0]: "running", ids[1]: "interrupted"}


async def test_on_disconnect_cancel_or_continue(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, app):
        gateway = app.state.gateway
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()
        queued = [
            await client.runs.create(thread, "agent", input=user(t), multitask_strategy="enqueue")
            for t in ("dropped", "kept")
        ]
        # Two streaming clients of the queued runs go away while they wait.
        for run, mode in zip(queued, ("cancel", "continue"), strict=True):
            record = await gateway.storage.get_run(run["run_id"])
            frames = queued_events(gateway, record, None, mode)
            assert (await anext(frames)).startswith(b"event: metadata")
            await frames.aclose()
        # And a client of the running run that asked for `cancel` on disconnect.
        active = gateway.runs.active[first["run_id"]]
        buffer = gateway.runs.new_buffer(first["run_id"], thread)
        active.attach(buffer)
        live = sse_events(active, buffer, "cancel", metadata=False)
        reading = asyncio.ensure_future(anext(live))
        await asyncio.sleep(0.1)
        reading.cancel()  # what the server does to a response whose client went away
        with pytest.raises(asyncio.CancelledError):
            await reading
        gate.release()
        values = await client.runs.join(thread, queued[1]["run_id"])
        assert await _status(client, thread, first["run_id"]) == "interrupted"
        assert await _status(client, thread, queued[0]["run_id"]) == "interrupted"
        assert contents(values)[-2:] == ["kept", "answer 2 to kept"]
        assert "dropped" not in contents(values)
