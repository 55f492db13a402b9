"""Restarts, shutdown, leases across instances, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from foldwise.bench._serve import open_app
from foldwise.gateway._messages import INTERRUPTED_TOOL_RESULT
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, is_summarizer_call, scripted_factory, user

COMPACTING = {
    "summarization": {
        "trigger": {"type": "messages", "value": 6},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
    }
}


def brain(messages: list[BaseMessage]) -> str:
    return "SUMMARY so far" if is_summarizer_call(messages) else "an answer " * 8


async def test_a_restarted_server_shows_the_same_state_transcript_and_receipts(
    tmp_path: Path, storage_url: str
) -> None:
    config = gateway_config(tmp_path, {**COMPACTING, "storage": {"url": storage_url}})
    model = ScriptedChatModel(default=brain)
    async with open_app(config, scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "keep-me", "metadata": {"team": "data"}})
        for i in range(4):
            r = await c.post(
                "/threads/keep-me/runs/wait",
                json={"assistant_id": "agent", "input": user(f"turn {i}")},
            )
            assert r.status_code == 200, r.text
        assert (await c.post("/threads/keep-me/compact", json={})).json()["compacted"] is True
        before = {
            route: (await c.get(f"/threads/keep-me/{route}")).json()
            for route in ("state", "transcript", "compactions")
        }
        thread_before = (await c.get("/threads/keep-me")).json()
        history_before = (await c.post("/threads/keep-me/history", json={"limit": 50})).json()
    assert len(before["compactions"]) >= 2  # automatic ones during the runs, then the manual one
    assert [e["kind"] for e in before["transcript"]["entries"]].count("message") == 8

    async with open_app(config, scripted_factory(ScriptedChatModel(default=brain))) as (c, _):
        for route in ("state", "transcript", "compactions"):
            assert (await c.get(f"/threads/keep-me/{route}")).json() == before[route], route
        assert (await c.get("/threads/keep-me")).json() == thread_before
        assert (
            await c.post("/threads/keep-me/history", json={"limit": 50})
        ).json() == history_before
        found = (await c.post("/threads/search", json={"metadata": {"team": "data"}})).json()
        assert [t["thread_id"] for t in found] == ["keep-me"]
        # And the thread goes on where it stopped.
        r = await c.post(
            "/threads/keep-me/runs/wait", json={"assistant_id": "agent", "input": user("back")}
        )
        assert r.status_code == 200
        transcript = (await c.get("/threads/keep-me/transcript")).json()["entries"]
        assert transcript[-2]["message"]["content"] == "back"


async def test_two_instances_on_one_database_exclude_each_other(
    tmp_path: Path, storage_url: str
) -> None:
    gate = Gate()
    config = gateway_config(tmp_path, {**COMPACTING, "storage": {"url": storage_url}})
    slow = ScriptedChatModel(responses=[gate.respond("slow")], default=brain)
    async with (
        open_app(config, scripted_factory(slow)) as (a, _),
        open_app(config, scripted_factory(ScriptedChatModel(default=brain))) as (b, _),
    ):
        await a.post("/threads", json={"thread_id": "shared"})
        run = asyncio.create_task(
            a.post("/threads/shared/runs/wait", json={"assistant_id": "agent", "input": user("x")})
        )
        await gate.wait_entered()
        assert (await b.get("/threads/shared")).json()["status"] == "busy"
        for attempt in (
            b.post("/threads/shared/compact", json={}),
            b.post("/threads/shared/runs/wait", json={"assistant_id": "agent", "input": user("y")}),
            b.delete("/threads/shared"),
        ):
            r = await attempt
            assert r.status_code == 409, r.text
            assert "retry-after" in r.headers
        gate.release()
        assert (await run).status_code == 200
        r = await b.post(
            "/threads/shared/runs/wait", json={"assistant_id": "agent", "input": user("y")}
        )
        assert r.status_code == 200
        entries = (await a.get("/threads/shared/transcript")).json()["entries"]
        assert [e["seq"] for e in entries] == [1, 2, 3, 4]
        # Deleted through one instance, gone for the other (checkpoints included).
        assert (await b.delete("/threads/shared")).status_code == 204
        assert (await a.get("/threads/shared")).status_code == 404
        await a.post("/threads", json={"thread_id": "shared"})
        assert (await a.get("/threads/shared/state")).json()["values"] == {}


async def test_the_lease_is_renewed_while_a_long_run_streams(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("finally")])
    config = gateway_config(tmp_path)
    # TTL 1 s, renewed every third of it: the slack keeps a loaded machine from failing this.
    async with open_app(config, scripted_factory(model), lease_ttl_seconds=1.0) as (c, app):
        storage = app.state.gateway.storage
        await c.post("/threads", json={"thread_id": "long"})
        stream = asyncio.create_task(
            c.post("/threads/long/runs/stream", json={"assistant_id": "agent", "input": user("x")})
        )
        await gate.wait_entered()
        first = await storage.get_thread_lock("long")
        await asyncio.sleep(2.5)  # well past the TTL: only renewals keep the lease alive
        later = await storage.get_thread_lock("long")
        assert first is not None and later is not None
        assert later.holder == first.holder and later.expires_at > first.expires_at
        assert not await storage.acquire_thread_lock("long", "intruder", "run", 30)
        gate.release()
        assert (await stream).status_code == 200
        assert await storage.get_thread_lock("long") is None


async def test_a_run_whose_lease_is_taken_over_stops(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("too late")])
    async with open_app(
        gateway_config(tmp_path), scripted_factory(model), lease_ttl_seconds=0.3
    ) as (c, app):
        storage = app.state.gateway.storage
        await c.post("/threads", json={"thread_id": "stolen"})
        run = asyncio.create_task(
            c.post("/threads/stolen/runs/wait", json={"assistant_id": "agent", "input": user("x")})
        )
        await gate.wait_entered()
        lock = await storage.get_thread_lock("stolen")
        assert lock is not None
        # Simulate a worker that stalled past its TTL: another one takes the thread over.
        await storage.release_thread_lock("stolen", lock.holder)
        assert await storage.acquire_thread_lock("stolen", "other-worker", "run", 30)
        r = await run
        assert r.status_code == 409 and "lease on the thread was lost" in r.json()["detail"]
        gate.release()
        runs = (await c.get("/threads/stolen/runs")).json()
        assert runs[0]["status"] == "error"
        held = await storage.get_thread_lock("stolen")
        assert held is not None and held.holder == "other-worker"  # not released by the loser


async def test_shutdown_interrupts_runs_without_corrupting_the_thread(tmp_path: Path) -> None:
    tool_started = threading.Event()
    tool_release = threading.Event()

    @tool
    def crawl(site: str) -> str:
        """Crawl a site (slow)."""
        tool_started.set()
        tool_release.wait(20)
        return "crawled"

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"the tool said: {last.content}")
        if "crawl" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "crawl", "args": {"site": "s"}, "id": "k1"}])
        return AIMessage("plain")

    model = ScriptedChatModel(default=respond)
    config = gateway_config(
        tmp_path, {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
    )
    try:
        async with open_app(
            config, scripted_factory(model, tools=[crawl]), shutdown_grace_seconds=0.2
        ) as (c, app):
            await c.post("/threads", json={"thread_id": "cut"})
            pending: Any = asyncio.create_task(
                c.post(
                    "/threads/cut/runs/wait",
                    json={"assistant_id": "agent", "input": user("crawl it")},
                )
            )
            assert await asyncio.to_thread(tool_started.wait, 20)
            shutdown_app = app
        response = await pending
    finally:
        tool_release.set()
    assert response.status_code == 503 and "interrupted" in response.json()["detail"]
    assert shutdown_app.state.gateway.runs.active == {}

    async with open_app(config, scripted_factory(model, tools=[crawl])) as (c, app):
        storage = app.state.gateway.storage
        assert await storage.get_thread_lock("cut") is None
        runs = (await c.get("/threads/cut/runs")).json()
        assert runs[0]["status"] == "interrupted"
        thread = (await c.get("/threads/cut")).json()
        assert thread["status"] == "idle"
        messages = thread["values"]["messages"]
        assert messages[-1]["type"] == "tool" and messages[-1]["content"] == INTERRUPTED_TOOL_RESULT
        assert messages[-1]["tool_call_id"] == "k1" and messages[-1]["status"] == "error"
        transcript = (await c.get("/threads/cut/transcript")).json()["entries"]
        assert transcript[-1]["message"]["content"] == INTERRUPTED_TOOL_RESULT
        # The next run works, and its request carries no orphaned tool call.
        r = await c.post(
            "/threads/cut/runs/wait", json={"assistant_id": "agent", "input": user("hello")}
        )
        assert r.status_code == 200, r.text
        sent = model.requests[-1].messages
        calls = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
        assert calls == results == {"k1"}


async def test_new_work_is_refused_while_shutting_down(tmp_path: Path) -> None:
    config = gateway_config(tmp_path)
    async with open_app(config, scripted_factory(ScriptedChatModel(default="x"))) as (c, app):
        await c.post("/threads", json={"thread_id": "late"})
        await app.state.gateway.runs.shutdown(0)
        r = await c.post(
            "/threads/late/runs/wait", json={"assistant_id": "agent", "input": user("x")}
        )
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert (await c.post("/threads/late/compact", json={})).status_code == 503
