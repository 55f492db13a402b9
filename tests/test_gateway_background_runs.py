"""Background and stateless runs driven with `langgraph_sdk`; recovery of a dead worker's runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from langgraph_sdk.client import LangGraphClient

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


@asynccontextmanager
async def sdk_gateway(
    tmp_path: Path, model: ScriptedChatModel, storage: str | None = None, **options: Any
) -> AsyncIterator[tuple[LangGraphClient, FastAPI]]:
    """The official SDK client talking to an in-process gateway (and the app)."""
    config = gateway_config(
        tmp_path, {**QUIET, **({"storage": {"url": storage}} if storage else {})}
    )
    async with open_app(config, scripted_factory(model), **options) as (_, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=30
        ) as http:
            yield LangGraphClient(http), app


def gated(gate: Gate) -> ScriptedChatModel:
    """A model whose first answer waits for the gate; later ones answer at once."""
    calls = 0

    def brain(messages: list[BaseMessage]) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            gate.block()
        return f"answer {calls} to {messages[-1].content}"

    return ScriptedChatModel(default=brain)


async def until(predicate: Any) -> None:
    for _ in range(400):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never held")


def contents(values: Any) -> list[str]:
    return [str(m["content"]) for m in values["messages"]]


async def test_create_get_join_and_list(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, ScriptedChatModel(default="done")) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "agent", input=user("hi"), metadata={"k": 1})
        assert run["thread_id"] == thread and run["status"] == "running"
        assert run["metadata"] == {"k": 1}
        values = await client.runs.join(thread, run["run_id"])
        assert contents(values) == ["hi", "done"]
        got = await client.runs.get(thread, run["run_id"])
        assert got["status"] == "success"
        assert [r["run_id"] for r in await client.runs.list(thread)] == [run["run_id"]]


async def test_join_stream_receives_the_rest_of_the_run(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, app):
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            thread, "agent", input=user("hi"), stream_mode=["values", "messages-tuple"]
        )
        await gate.wait_entered()
        active = app.state.gateway.runs.active[run["run_id"]]

        async def join() -> list[tuple[str, Any]]:
            parts = client.runs.join_stream(thread, run["run_id"], stream_mode="messages-tuple")
            return [(p.event, p.data) async for p in parts]

        joined = asyncio.create_task(join())
        await until(lambda: active.listeners)
        gate.release()
        events = await joined
        names = [name for name, _ in events]
        assert "messages" in names and "values" not in names
        assert names[-1] == "end" and events[-1][1]["status"] == "success"
        # Joining a finished run ends at once.
        late = [p.event async for p in client.runs.join_stream(thread, run["run_id"])]
        assert late == ["end"]


async def test_cancel_interrupts_and_the_thread_stays_usable(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "agent", input=user("slow"))
        await gate.wait_entered()
        cancelled = await client.runs.cancel(thread, run["run_id"], wait=True)
        gate.release()
        assert cancelled["status"] == "interrupted"
        values = await client.runs.wait(thread, "agent", input=user("again"))
        assert contents(values)[0] == "slow" and contents(values)[-1] == "answer 2 to again"


async def test_multitask_strategies(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread, "agent", input=user("first"))
        await gate.wait_entered()
        with pytest.raises(httpx.HTTPStatusError) as busy:
            await client.runs.create(thread, "agent", input=user("x"), multitask_strategy="reject")
        assert busy.value.response.status_code == 409
        queued = await client.runs.create(
            thread, "agent", input=user("queued"), multitask_strategy="enqueue"
        )
        assert queued["status"] == "pending"
        values = await client.runs.wait(
            thread, "agent", input=user("second"), multitask_strategy="interrupt"
        )
        gate.release()
        assert contents(values)[-1] == "answer 2 to second"
        assert (await client.runs.get(thread, first["run_id"]))["status"] == "interrupted"
        # `interrupt` cancelled the queued run too, before it ran.
        assert (await client.runs.get(thread, queued["run_id"]))["status"] == "interrupted"
        assert "queued" not in contents(values)


async def test_a_dead_workers_run_is_marked_failed(tmp_path: Path, storage_url: str) -> None:
    model = ScriptedChatModel(default="fine")
    dead_run = str(uuid.uuid4())
    async with sdk_gateway(tmp_path, model, storage_url) as (client, app):
        thread = (await client.threads.create())["thread_id"]
        storage = app.state.gateway.storage
        # What a killed worker leaves: a running row, a busy thread, an expired lease.
        await storage.create_run(thread, dead_run, "agent", "run")
        await storage.update_thread(thread, status="busy")
        stale = str(uuid.uuid4())
        await storage.create_run(thread, stale, "agent", "run")
        # Read while nobody holds the thread: the row is settled on the spot.
        assert (await client.runs.get(thread, stale))["status"] == "error"
    async with sdk_gateway(tmp_path, model, storage_url) as (client, app):
        # Start-up finished it (the rows say so before any request reads them).
        storage = app.state.gateway.storage
        assert (await storage.get_run(dead_run)).status == "error"
        assert (await storage.get_thread(thread)).status == "idle"
        run = await client.runs.get(thread, dead_run)
        assert run["status"] == "error" and run["error"] == "worker died during the run"
        assert (await client.threads.get(thread))["status"] == "idle"
        values = await client.runs.wait(thread, "agent", input=user("still there?"))
        assert contents(values) == ["still there?", "fine"]


async def test_a_restart_during_a_background_run_keeps_its_input(tmp_path: Path) -> None:
    gate = Gate()
    model = gated(gate)
    try:
        async with sdk_gateway(tmp_path, model, shutdown_grace_seconds=0.1) as (client, _):
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(thread, "agent", input=user("accepted"))
            await gate.wait_entered()
    finally:
        gate.release()
    async with sdk_gateway(tmp_path, model) as (client, _):
        assert (await client.runs.get(thread, run["run_id"]))["status"] == "interrupted"
        transcript = await client.http.get(f"/threads/{thread}/transcript")
        assert transcript["entries"][0]["message"]["content"] == "accepted"
        values = await client.runs.wait(thread, "agent", input=user("next"))
        assert contents(values)[-1] == "answer 2 to next"


async def test_stateless_runs_delete_their_thread_unless_kept(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, ScriptedChatModel(default="ok")) as (client, app):
        storage = app.state.gateway.storage
        values = await client.runs.wait(None, "agent", input=user("hi"))
        assert contents(values) == ["hi", "ok"]
        assert await storage.search_threads() == []
        parts = [p async for p in client.runs.stream(None, "agent", input=user("hi"))]
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        streamed = parts[0].data["thread_id"]
        await until_async(lambda: storage.get_thread(streamed), None)
        kept = await client.runs.create(None, "agent", input=user("keep"), on_completion="keep")
        values = await client.runs.join(kept["thread_id"], kept["run_id"])
        assert contents(values) == ["keep", "ok"]
        assert (await client.threads.get(kept["thread_id"]))["status"] == "idle"


async def until_async(read: Any, expected: Any) -> None:
    for _ in range(400):
        if await read() == expected:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never held")


async def test_batch_starts_thread_and_stateless_runs(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, ScriptedChatModel(default="ok")) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        runs = await client.runs.create_batch(
            [
                {"assistant_id": "agent", "thread_id": thread, "input": user("a")},
                {"assistant_id": "agent", "input": user("b")},
            ]
        )
        assert [r["thread_id"] == thread for r in runs] == [True, False]
        values = await client.runs.join(thread, runs[0]["run_id"])
        assert contents(values) == ["a", "ok"]
        with pytest.raises(httpx.HTTPStatusError) as caught:
            await client.runs.create_batch([{"assistant_id": "agent", "webhook": "http://x"}])
        assert caught.value.response.status_code == 422
        assert caught.value.response.json()["detail"].startswith("[0].webhook")


async def test_a_resumable_run_replays_after_last_event_id(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk_gateway(tmp_path, gated(gate)) as (client, app):
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            thread, "agent", input=user("hi"), stream_mode="values", stream_resumable=True
        )
        await gate.wait_entered()  # the input's `values` event (id 1) went out already
        active = app.state.gateway.runs.active[run["run_id"]]

        async def join(**options: Any) -> list[Any]:
            parts = client.runs.join_stream(thread, run["run_id"], **options)
            return [p async for p in parts]

        resumed = asyncio.create_task(join(last_event_id="0"))
        live = asyncio.create_task(join())
        await until(lambda: len(active.listeners) == 2)
        gate.release()
        replayed, fresh = await resumed, await live
        ids = [int(p.id) for p in replayed]
        assert ids == sorted(ids) and ids[0] == 1
        assert contents(replayed[0].data) == ["hi"]
        assert [p.event for p in replayed][-1] == "end"
        # Without Last-Event-ID a client gets the events from the moment it joined.
        assert [int(p.id) for p in fresh] == ids[1:]
