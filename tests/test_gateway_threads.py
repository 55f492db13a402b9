"""Thread routes in-process: create, get, patch, search, state, history, delete."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from foldwise.bench._serve import open_app
from foldwise.offload import FilesystemArtifactStore
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


async def test_create_get_patch_and_duplicates(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        generated = (await c.post("/threads", json={})).json()
        assert len(generated["thread_id"]) == 36 and generated["status"] == "idle"
        assert generated["values"] is None and generated["interrupts"] == {}
        made = await c.post(
            "/threads", json={"thread_id": "t-1", "metadata": {"user": "ada", "n": 1}}
        )
        assert made.status_code == 200 and made.json()["metadata"] == {"user": "ada", "n": 1}
        dup = await c.post("/threads", json={"thread_id": "t-1"})
        assert dup.status_code == 409 and dup.json() == {"detail": "thread 't-1' already exists"}
        same = await c.post("/threads", json={"thread_id": "t-1", "if_exists": "do_nothing"})
        assert same.status_code == 200 and same.json()["metadata"]["user"] == "ada"
        got = await c.get("/threads/t-1")
        assert got.status_code == 200 and got.json()["created_at"] == made.json()["created_at"]
        patched = await c.patch("/threads/t-1", json={"metadata": {"n": 2, "tag": "x"}})
        assert patched.json()["metadata"] == {"user": "ada", "n": 2, "tag": "x"}
        assert (await c.patch("/threads/nope", json={"metadata": {}})).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/threads/has%20space", None),
        ("get", "/threads/" + "x" * 129, None),
        ("get", "/threads/semi;colon/state", None),
        ("post", "/threads/%C3%A9t%C3%A9/history", {}),
        ("delete", "/threads/dot.dot", None),
    ],
)
async def test_malformed_thread_ids_get_422(
    tmp_path: Path, method: str, path: str, body: Any
) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        r = await c.request(method, path, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("invalid thread id")


async def test_thread_ids_in_bodies_are_validated(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        r = await c.post("/threads", json={"thread_id": "../../etc/passwd"})
        assert r.status_code == 422 and r.json()["detail"].startswith(
            "thread_id: invalid thread id"
        )
        r = await c.post("/threads/search", json={"ids": ["ok", "no/pe"]})
        assert r.status_code == 422 and r.json()["detail"].startswith("ids[1]")
        r = await c.post("/threads", json={"thread_id": "t", "supersteps": [{"updates": []}]})
        assert r.status_code == 422 and r.json()["detail"].startswith("supersteps")


async def test_search_by_metadata_ids_and_status(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        for i in range(5):
            meta = {"user": "ada" if i % 2 == 0 else "bob", "n": i}
            await c.post("/threads", json={"thread_id": f"s{i}", "metadata": meta})
        found = (await c.post("/threads/search", json={"metadata": {"user": "ada"}})).json()
        assert [t["thread_id"] for t in found] == ["s4", "s2", "s0"]
        page = (await c.post("/threads/search", json={"limit": 2, "offset": 1})).json()
        assert [t["thread_id"] for t in page] == ["s3", "s2"]
        by_ids = (await c.post("/threads/search", json={"ids": ["s1", "s3", "zz"]})).json()
        assert sorted(t["thread_id"] for t in by_ids) == ["s1", "s3"]
        await c.post("/threads/s1/runs/wait", json={"assistant_id": "agent", "input": user("hi")})
        updated = (
            await c.post("/threads/search", json={"sort_by": "updated_at", "limit": 1})
        ).json()
        assert updated[0]["thread_id"] == "s1"
        assert (await c.post("/threads/search", json={"status": "error"})).json() == []
        bad = await c.post("/threads/search", json={"limit": 0})
        assert bad.status_code == 422 and bad.json()["detail"].startswith("limit")
        bad = await c.post("/threads/search", json={"values": {"x": 1}})
        assert bad.status_code == 422


async def test_state_and_history(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=["one", "two", "three"])
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "h"})
        fresh = (await c.get("/threads/h/state")).json()
        assert fresh["values"] == {} and fresh["next"] == []
        assert (await c.post("/threads/h/history", json={})).json() == []
        for text in ("a", "b", "c"):
            await c.post(
                "/threads/h/runs/wait", json={"assistant_id": "agent", "input": user(text)}
            )
        state = (await c.get("/threads/h/state")).json()
        assert [m["content"] for m in state["values"]["messages"]] == [
            "a",
            "one",
            "b",
            "two",
            "c",
            "three",
        ]
        assert (
            state["checkpoint"]["thread_id"] == "h" and state["checkpoint"]["checkpoint_ns"] == ""
        )
        assert state["parent_checkpoint"]["checkpoint_id"]
        assert state["metadata"]["assistant_id"] == "agent"
        assert state["next"] == [] and state["tasks"] == []
        history = (await c.post("/threads/h/history", json={"limit": 3})).json()
        assert len(history) == 3
        assert history[0]["checkpoint"] == state["checkpoint"]
        older = (
            await c.post(
                "/threads/h/history", json={"limit": 100, "before": history[0]["checkpoint"]}
            )
        ).json()
        assert older[0]["checkpoint"] == history[1]["checkpoint"]
        counts = [len(h["values"].get("messages", [])) for h in older]
        assert counts == sorted(counts, reverse=True) and counts[-1] == 0
        by_string = (
            await c.post(
                "/threads/h/history",
                json={"before": history[0]["checkpoint"]["checkpoint_id"], "limit": 1},
            )
        ).json()
        assert by_string[0]["checkpoint"] == history[1]["checkpoint"]
        assert (await c.post("/threads/h/history", json={"limit": 0})).status_code == 422
        bad = await c.post("/threads/h/history", json={"metadata": {"x') OR '1'='1": 1}})
        assert bad.status_code == 422 and bad.json()["detail"].startswith(
            "metadata: invalid filter key"
        )
        by_meta = (await c.post("/threads/h/history", json={"metadata": {"source": "loop"}})).json()
        assert by_meta and all(h["metadata"]["source"] == "loop" for h in by_meta)


async def test_delete_removes_state_transcript_and_artifacts(tmp_path: Path) -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "page text " * 4000

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("read it")
        return AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": "u"}, "id": "f1"}])

    config = gateway_config(tmp_path, {**QUIET, "offload": {"tool_token_limit": 5000}})
    model = ScriptedChatModel(default=brain)
    async with open_app(config, scripted_factory(model, tools=[fetch])) as (c, app):
        await c.post("/threads", json={"thread_id": "gone"})
        await c.post("/threads", json={"thread_id": "kept"})
        for thread in ("gone", "kept"):
            r = await c.post(
                f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("go")}
            )
            assert r.status_code == 200, r.text
        store = FilesystemArtifactStore(tmp_path / "artifacts")
        assert store.list("gone") and store.list("kept")
        r = await c.delete("/threads/gone")
        assert r.status_code == 204 and r.content == b""
        assert (await c.get("/threads/gone")).status_code == 404
        assert (await c.get("/threads/gone/transcript")).status_code == 404
        assert store.list("gone") == []
        checkpointer = app.state.gateway.checkpointer
        assert await checkpointer.aget_tuple({"configurable": {"thread_id": "gone"}}) is None
        assert store.list("kept")
        assert (await c.get("/threads/kept/state")).json()["values"]["messages"]
        assert (await c.delete("/threads/gone")).status_code == 404
        # The id can be reused from scratch.
        await c.post("/threads", json={"thread_id": "gone"})
        assert (await c.get("/threads/gone/state")).json()["values"] == {}


async def test_delete_while_a_run_is_in_flight_gets_409(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("done")])
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "busy"})
        run = asyncio.create_task(
            c.post("/threads/busy/runs/wait", json={"assistant_id": "agent", "input": user("x")})
        )
        await gate.wait_entered()
        r = await c.delete("/threads/busy")
        assert r.status_code == 409 and "retry-after" in r.headers
        gate.release()
        assert (await run).status_code == 200
        assert (await c.delete("/threads/busy")).status_code == 204
