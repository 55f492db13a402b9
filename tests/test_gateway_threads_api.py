"""Thread API gaps through the official `langgraph_sdk` client against an in-process gateway.

update_state (with `as_node`, from a checkpoint, 409 while a run holds the thread), state at a
checkpoint (GET and POST), history filters, copy, count, `if_exists`, and the `interrupted`
status with its `interrupts`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.types import interrupt
from langgraph_sdk.client import LangGraphClient

from foldwise.bench._serve import open_app
from foldwise.gateway import _thread_copy
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


@pytest.fixture
def storage(storage_url: str) -> dict[str, Any]:
    """Config overrides for the backend of `storage_url` (SQLite file or Postgres schema)."""
    return {"storage": {"url": storage_url}}


@asynccontextmanager
async def sdk(
    tmp_path: Path, model: Any = None, storage: dict[str, Any] | None = None, **factory: Any
) -> AsyncIterator[LangGraphClient]:
    """The SDK client on an in-process gateway whose agent runs `model`."""
    model = model or ScriptedChatModel(default="ok")
    config = gateway_config(tmp_path, {**QUIET, **(storage or {})})
    async with open_app(config, scripted_factory(model, **factory)) as (http, _):
        yield LangGraphClient(http)


async def _status(call: Any) -> tuple[int, Any]:
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await call
    return raised.value.response.status_code, raised.value.response.json()


async def _transcript(client: LangGraphClient, thread_id: str) -> list[dict[str, Any]]:
    """The transcript without what differs between threads (`seq`, run ids)."""
    answer = await client.http.get(f"/threads/{thread_id}/transcript", params={"limit": 1000})
    keys = ("kind", "message_id", "created_at", "message")
    return [{k: e[k] for k in keys} for e in answer["entries"]]


def _texts(state: Any) -> list[str]:
    return [m["content"] for m in state["values"]["messages"]]


async def test_create_if_exists_and_count(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        first = await client.threads.create(thread_id="t-1", metadata={"team": "a"})
        await client.threads.create(metadata={"team": "b"})
        await client.threads.create(metadata={"team": "a", "x": 1})
        assert (await _status(client.threads.create(thread_id="t-1", if_exists="raise")))[0] == 409
        again = await client.threads.create(
            thread_id="t-1", metadata={"team": "z"}, if_exists="do_nothing"
        )
        assert again == first  # the existing thread, untouched
        assert await client.threads.count() == 3
        assert await client.threads.count(metadata={"team": "a"}) == 2
        assert await client.threads.count(status="idle") == 3
        assert await client.threads.count(status="busy") == 0
        assert await client.threads.count(status="interrupted") == 0
        code, body = await _status(client.threads.count(values={"a": 1}))
        assert code == 422 and "values" in body["detail"]


async def test_update_state_as_node_and_from_a_checkpoint(
    tmp_path: Path, storage: dict[str, Any]
) -> None:
    model = ScriptedChatModel(responses=["one", "two"], default="more")
    async with sdk(tmp_path, model, storage) as c:
        thread_id = (await c.threads.create())["thread_id"]
        await c.runs.wait(thread_id, "agent", input=user("first"))
        head = await c.threads.get_state(thread_id)
        flagged = {
            "role": "user",
            "content": "added",
            "id": "added-1",
            "additional_kwargs": {"hide_from_ui": True, "mine": 1},
        }
        answer = await c.threads.update_state(thread_id, {"messages": [flagged]}, as_node="model")
        assert set(answer) == {"checkpoint"}
        assert answer["checkpoint"]["thread_id"] == thread_id
        assert answer["checkpoint"]["checkpoint_ns"] == ""
        new_head = await c.threads.get_state(thread_id)
        assert new_head["checkpoint"]["checkpoint_id"] == answer["checkpoint"]["checkpoint_id"]
        assert _texts(new_head) == ["first", "one", "added"]
        added = new_head["values"]["messages"][-1]
        assert added["additional_kwargs"] == {"mine": 1}  # foldwise's flags never from a client
        assert new_head["metadata"]["source"] == "update"
        # The transcript records what the update added.
        transcript = (await c.http.get(f"/threads/{thread_id}/transcript")).get("entries", [])
        assert [e["message_id"] for e in transcript][-1] == "added-1"
        # From an earlier checkpoint: a fork off the first run's head.
        fork = await c.threads.update_state(
            thread_id,
            {"messages": [{"role": "user", "content": "forked"}]},
            as_node="model",
            checkpoint={"checkpoint_id": head["checkpoint"]["checkpoint_id"]},
        )
        forked = await c.threads.get_state(thread_id)
        assert forked["checkpoint"]["checkpoint_id"] == fork["checkpoint"]["checkpoint_id"]
        assert _texts(forked) == ["first", "one", "forked"]
        assert forked["parent_checkpoint"]["checkpoint_id"] == head["checkpoint"]["checkpoint_id"]


async def test_update_state_refusals(tmp_path: Path) -> None:
    async with sdk(tmp_path) as c:
        thread_id = (await c.threads.create())["thread_id"]
        await c.runs.wait(thread_id, "agent", input=user("first"))
        cases = [
            ({"summary_text": "x"}, {}, 422, "values.summary_text"),
            ({"messages": [{"role": "system", "content": "x"}]}, {}, 422, "values.messages[0]"),
            ({"messages": []}, {"as_node": "nowhere"}, 422, "as_node"),
            (None, {"checkpoint_id": "1f0-unknown"}, 404, "not found"),
        ]
        for values, options, code, words in cases:
            status, body = await _status(c.threads.update_state(thread_id, values, **options))
            assert (status, words in body["detail"]) == (code, True), body
        status, _ = await _status(c.threads.update_state("missing", {"messages": []}))
        assert status == 404


async def test_update_state_is_409_while_a_run_holds_the_thread(tmp_path: Path) -> None:
    gate = Gate()
    async with sdk(tmp_path, ScriptedChatModel(responses=[gate.respond("slow")])) as c:
        thread_id = (await c.threads.create())["thread_id"]
        run = asyncio.create_task(c.runs.wait(thread_id, "agent", input=user("go")))
        await gate.wait_entered()
        try:
            update = c.threads.update_state(
                thread_id, {"messages": [{"role": "user", "content": "x"}]}, as_node="model"
            )
            status, _ = await _status(update)
            assert status == 409
            assert (await c.threads.get(thread_id))["status"] == "busy"
        finally:
            gate.release()
        await run
        assert _texts(await c.threads.get_state(thread_id)) == ["go", "slow"]


async def test_state_at_checkpoint_and_history_filters(tmp_path: Path) -> None:
    async with sdk(tmp_path, ScriptedChatModel(responses=["one", "two"], default="more")) as c:
        thread_id = (await c.threads.create())["thread_id"]
        await c.runs.wait(thread_id, "agent", input=user("first"))
        first_head = await c.threads.get_state(thread_id)
        await c.runs.wait(thread_id, "agent", input=user("second"))
        first_id = first_head["checkpoint"]["checkpoint_id"]
        by_get = await c.threads.get_state(thread_id, checkpoint_id=first_id)
        by_post = await c.threads.get_state(thread_id, checkpoint={"checkpoint_id": first_id})
        assert by_get == by_post and by_get["checkpoint"]["checkpoint_id"] == first_id
        assert _texts(by_get) == ["first", "one"]
        for call in (
            c.threads.get_state(thread_id, checkpoint_id="1f0-unknown"),
            c.threads.get_state(thread_id, checkpoint={"checkpoint_id": "1f0-unknown"}),
            c.threads.get_state("missing", checkpoint_id=first_id),
        ):
            assert (await _status(call))[0] == 404
        everything = await c.threads.get_history(thread_id, limit=100)
        ids = [s["checkpoint"]["checkpoint_id"] for s in everything]
        assert ids.index(first_id) > 0
        starting = await c.threads.get_history(thread_id, checkpoint={"checkpoint_id": first_id})
        assert starting[0]["checkpoint"]["checkpoint_id"] == first_id
        before = await c.threads.get_history(thread_id, before={"checkpoint_id": first_id})
        older = ids[ids.index(first_id) + 1 :][:10]
        assert [s["checkpoint"]["checkpoint_id"] for s in before] == older
        two = await c.threads.get_history(thread_id, limit=2)
        assert [s["checkpoint"]["checkpoint_id"] for s in two] == ids[:2]
        inputs = await c.threads.get_history(thread_id, metadata={"source": "input"}, limit=100)
        assert len(inputs) == 2 and all(s["metadata"]["source"] == "input" for s in inputs)


async def test_copy_keeps_the_whole_history(
    tmp_path: Path, storage: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_thread_copy, "COPY_PAGE", 3)  # several pages
    model = ScriptedChatModel(responses=["one", "two"], default="more")
    async with sdk(tmp_path, model, storage) as c:
        source = await c.threads.create(metadata={"team": "a"})
        thread_id = source["thread_id"]
        await c.runs.wait(thread_id, "agent", input=user("first"))
        await c.runs.wait(thread_id, "agent", input=user("second"))
        compacted = await c.http.post(
            f"/threads/{thread_id}/compact", json={"keep": {"type": "messages", "value": 1}}
        )
        assert compacted["compacted"] is True
        copy = await c.threads.copy(thread_id)
        assert copy["thread_id"] != thread_id
        assert copy["metadata"] == (await c.threads.get(thread_id))["metadata"]
        assert copy["metadata"]["team"] == "a"
        assert copy["status"] == "idle" and copy["interrupts"] == {}
        old = await c.threads.get_history(thread_id, limit=100)
        new = await c.threads.get_history(copy["thread_id"], limit=100)
        assert [s["values"] for s in new] == [s["values"] for s in old]
        assert [s["checkpoint"]["checkpoint_id"] for s in new] == [
            s["checkpoint"]["checkpoint_id"] for s in old
        ]
        assert {s["checkpoint"]["thread_id"] for s in new} == {copy["thread_id"]}
        # foldwise's records come along: the transcript (with the marker) and the receipts.
        source_log = await _transcript(c, thread_id)
        assert [e["kind"] for e in source_log] == ["message"] * 4 + ["compaction"]
        assert await _transcript(c, copy["thread_id"]) == source_log
        receipts = await c.http.get(f"/threads/{thread_id}/compactions")
        copied = await c.http.get(f"/threads/{copy['thread_id']}/compactions")
        assert [r["id"] for r in copied] == [r["id"] for r in receipts] and len(receipts) == 1
        # The copy is a thread of its own: a run on it leaves the source alone.
        await c.runs.wait(copy["thread_id"], "agent", input=user("third"))
        assert _texts(await c.threads.get_state(copy["thread_id"]))[-2:] == ["third", "more"]
        assert await _transcript(c, thread_id) == source_log
        copy_log = await _transcript(c, copy["thread_id"])
        assert copy_log[:5] == source_log and len(copy_log) == 7
        assert (await _status(c.threads.copy("missing")))[0] == 404


@tool
def ask_human(question: str) -> str:
    """Ask the human a question and wait for the answer."""
    return str(interrupt({"question": question}))


async def test_interrupted_status_and_interrupts(tmp_path: Path, storage: dict[str, Any]) -> None:
    ask = {"name": "ask_human", "args": {"question": "ok?"}, "id": "q1"}
    call = AIMessage("", tool_calls=[ask])
    model = ScriptedChatModel(responses=[call])
    async with sdk(tmp_path, model, storage, tools=[ask_human]) as c:
        thread_id = (await c.threads.create())["thread_id"]
        await c.runs.wait(thread_id, "agent", input=user("please ask"))
        thread = await c.threads.get(thread_id)
        assert thread["status"] == "interrupted"
        [(task_id, pending)] = thread["interrupts"].items()
        assert pending[0]["value"] == {"question": "ok?"} and pending[0]["id"]
        state = await c.threads.get_state(thread_id)
        assert state["next"] == ["tools"]
        assert state["interrupts"][0]["value"] == {"question": "ok?"}
        assert state["tasks"][0]["id"] == task_id
        copy = await c.threads.copy(thread_id)
        assert copy["status"] == "interrupted" and list(copy["interrupts"].values()) == [pending]
        idle = (await c.threads.create())["thread_id"]
        # Listings say it too, and the idle / interrupted filters tell them apart.
        listed = {t["thread_id"]: t for t in await c.threads.search(limit=10)}
        assert listed[thread_id]["interrupts"] == thread["interrupts"]
        assert listed[thread_id]["status"] == "interrupted" and listed[idle]["status"] == "idle"
        interrupted = await c.threads.search(status="interrupted")
        assert {t["thread_id"] for t in interrupted} == {thread_id, copy["thread_id"]}
        assert [t["thread_id"] for t in await c.threads.search(status="idle")] == [idle]
        assert await c.threads.count(status="interrupted") == 2
        assert await c.threads.count(status="idle") == 1
        by_id = await c.threads.search(ids=[thread_id, idle], status="interrupted")
        assert [t["thread_id"] for t in by_id] == [thread_id]
        # Answering the tool call as the tools node leaves nothing pending.
        answer = {"role": "tool", "content": "yes", "tool_call_id": "q1"}
        await c.threads.update_state(thread_id, {"messages": [answer]}, as_node="tools")
        after = await c.threads.get(thread_id)
        assert after["status"] == "idle" and after["interrupts"] == {}
        assert await c.threads.count(status="interrupted") == 1


async def test_update_state_checks_messages_like_run_input(tmp_path: Path) -> None:
    """An existing id would replace a message in place; an orphan tool result breaks the
    next provider call. Both are refused (422), as for run input."""
    async with sdk(tmp_path) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(
            thread, "agent", input={"messages": [{"role": "user", "content": "hi"}]}
        )
        state = await client.threads.get_state(thread)
        answer_id = state["values"]["messages"][-1]["id"]
        for message, field in [
            ({"role": "user", "content": "x", "id": answer_id}, "values.messages[0].id"),
            ({"role": "tool", "content": "x", "tool_call_id": "nope"}, "values.messages[0]"),
        ]:
            status, body = await _status(
                client.threads.update_state(thread, {"messages": [message]})
            )
            assert status == 422, body
            assert body["detail"].startswith(field), body
        after = await client.threads.get_state(thread)
        assert after["values"]["messages"] == state["values"]["messages"]


async def test_search_answers_each_threads_values(tmp_path: Path, storage: dict[str, Any]) -> None:
    """Like LangGraph Server: agent-chat-ui's history labels threads with `values.messages[0]`."""
    async with sdk(tmp_path, ScriptedChatModel(default="hello back"), storage) as c:
        ran = (await c.threads.create(metadata={"graph_id": "agent"}))["thread_id"]
        await c.runs.wait(ran, "agent", input=user("first words"))
        empty = (await c.threads.create(metadata={"graph_id": "agent"}))["thread_id"]
        state = await c.threads.get_state(ran)
        for search in (
            {"metadata": {"graph_id": "agent"}, "limit": 100},
            {"status": "idle"},
            {"ids": [ran, empty]},
        ):
            listed = {t["thread_id"]: t for t in await c.threads.search(**search)}
            assert listed[ran]["values"] == state["values"], search
            assert [m["content"] for m in listed[ran]["values"]["messages"]] == [
                "first words",
                "hello back",
            ]
            assert listed[empty]["values"] is None, search
