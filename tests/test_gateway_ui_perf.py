"""The page's heavy reads stay cheap (review 14): interrupts and the head checkpoint id come
from one SQL query on LangGraph's own tables, the transcript's `in_context` ids are cached per
head checkpoint (and never stale), and regex artifact searches from HTTP are capped while the
model's own `search_offloaded` calls are not."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.types import interrupt

from foldwise.bench._serve import open_app
from foldwise.gateway._checkpoint_head import _head_from_tuple, read_head
from foldwise.gateway._deps import MAX_REGEX_SEARCHES, Gateway
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user
from tests.test_gateway_ui_api import SETTINGS, _build_thread, _model, big_tool


@tool
def ask_human(question: str) -> str:
    """Ask the human a question and wait for the answer."""
    return str(interrupt({"question": question}))


def _asker(messages: list[BaseMessage]) -> Any:
    last = messages[-1]
    if isinstance(last, HumanMessage) and "please ask" in str(last.content):
        ask = {"name": "ask_human", "args": {"question": "ok?"}, "id": f"q-{uuid.uuid4().hex}"}
        return AIMessage("", tool_calls=[{**ask, "type": "tool_call"}])
    return "fine"


async def _statuses(c: httpx.AsyncClient) -> dict[str, str]:
    r = await c.post("/threads/overview", json={"limit": 200})
    assert r.status_code == 200, r.text
    return {t["thread_id"]: t["status"] for t in r.json()["threads"]}


async def test_interrupts_are_read_from_the_head_by_sql(tmp_path: Path, storage_url: str) -> None:
    """A real `interrupt()` shows as `interrupted` in the overview and search; the SQL read of
    LangGraph's tables (fails if they are renamed) agrees with `aget_tuple`."""
    config = gateway_config(
        tmp_path,
        {
            "summarization": {"trigger": {"type": "messages", "value": 1000}},
            "storage": {"url": storage_url},
        },
    )
    model = ScriptedChatModel(default=_asker)
    async with open_app(config, scripted_factory(model, tools=[ask_human])) as (c, app):
        gateway: Gateway = app.state.gateway
        for thread in ("asked", "answered", "never"):
            assert (await c.post("/threads", json={"thread_id": thread})).is_success
        for thread, text in (("asked", "please ask"), ("answered", "hello")):
            r = await c.post(
                f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(text)}
            )
            assert r.status_code == 200, r.text
        assert await _statuses(c) == {"asked": "interrupted", "answered": "idle", "never": "idle"}

        head = await read_head(gateway.checkpointer, "asked")
        assert head is not None and head == await _head_from_tuple(gateway.checkpointer, "asked")
        [(task_id, [pending])] = head.interrupts.items()
        assert pending["value"] == {"question": "ok?"} and pending["id"]
        state = (await c.get("/threads/asked/state")).json()
        assert head.checkpoint_id == state["checkpoint"]["checkpoint_id"]
        assert state["tasks"][0]["id"] == task_id
        idle = await read_head(gateway.checkpointer, "answered")
        assert idle is not None and idle.interrupts == {}
        assert idle == await _head_from_tuple(gateway.checkpointer, "answered")
        assert await read_head(gateway.checkpointer, "never") is None
        # /threads/search answers the same interrupts as GET /threads/{id}
        listed = {t["thread_id"]: t for t in (await c.post("/threads/search", json={})).json()}
        thread = (await c.get("/threads/asked")).json()
        assert listed["asked"]["interrupts"] == thread["interrupts"] == {task_id: [pending]}
        assert listed["asked"]["status"] == "interrupted" and listed["answered"]["interrupts"] == {}

        # answering the call leaves nothing pending: a new head, idle everywhere
        call_id = state["values"]["messages"][-1]["tool_calls"][0]["id"]
        answer = {"role": "tool", "content": "yes", "tool_call_id": call_id}
        r = await c.post(
            "/threads/asked/state", json={"values": {"messages": [answer]}, "as_node": "tools"}
        )
        assert r.status_code == 200, r.text
        after = await read_head(gateway.checkpointer, "asked")
        assert after is not None and after.interrupts == {}
        assert after.checkpoint_id == r.json()["checkpoint"]["checkpoint_id"] != head.checkpoint_id
        assert set((await _statuses(c)).values()) == {"idle"}


async def _in_context(c: httpx.AsyncClient, thread: str) -> dict[str, bool]:
    """`in_context` of every message entry, paged backwards three at a time."""
    found: dict[str, bool] = {}
    before = 2**63 - 1
    while True:
        body = (await c.get(f"/threads/{thread}/transcript?limit=3&before_seq={before}")).json()
        found.update(
            {e["message_id"]: e["in_context"] for e in body["entries"] if e["kind"] == "message"}
        )
        if not body["has_more"]:
            return found
        before = body["next_before_seq"]


async def _in_state(c: httpx.AsyncClient, thread: str) -> set[str]:
    state = (await c.get(f"/threads/{thread}/state")).json()
    return {m["id"] for m in state["values"]["messages"]}


async def _check_in_context(c: httpx.AsyncClient, gateway: Gateway, thread: str) -> None:
    """Every page says what the head checkpoint holds; the head's ids are cached once."""
    seen = await _in_context(c, thread)
    in_state = await _in_state(c, thread)
    assert {i for i, inside in seen.items() if inside} == in_state & set(seen), thread
    head = await read_head(gateway.checkpointer, thread)
    assert head is not None
    assert gateway.context_ids[(thread, head.checkpoint_id)] == in_state


async def test_in_context_is_cached_per_head_and_never_stale(
    tmp_path: Path, storage_url: str
) -> None:
    config = gateway_config(tmp_path, {**SETTINGS, "storage": {"url": storage_url}})
    _, factory = _model(config)
    async with open_app(config, factory) as (c, app):
        gateway: Gateway = app.state.gateway
        await _build_thread(c, "t")
        await _check_in_context(c, gateway, "t")
        # The cache is what the pages read: a planted entry for the head is served as is.
        head = await read_head(gateway.checkpointer, "t")
        assert head is not None
        key = ("t", head.checkpoint_id)
        real = gateway.context_ids[key]
        newest = max(real)
        gateway.context_ids[key] = frozenset({newest})
        assert {i for i, inside in (await _in_context(c, "t")).items() if inside} == {newest}
        gateway.context_ids[key] = real

        r = await c.post(
            "/threads/t/runs/wait", json={"assistant_id": "agent", "input": user("new run")}
        )
        assert r.status_code == 200, r.text
        await _check_in_context(c, gateway, "t")
        update = {"values": {"messages": [{"role": "user", "content": "typed", "id": "upd-1"}]}}
        assert (await c.post("/threads/t/state", json=update)).status_code == 200
        await _check_in_context(c, gateway, "t")
        before = await _in_context(c, "t")
        assert before["upd-1"] is True
        compacted = await c.post(
            "/threads/t/compact", json={"keep": {"type": "messages", "value": 1}}
        )
        assert compacted.json()["compacted"] is True, compacted.text
        await _check_in_context(c, gateway, "t")
        after = await _in_context(c, "t")  # folded away: in context before, not after
        assert {i for i in before if before[i] and not after[i]}, (before, after)
        copy = (await c.post("/threads/t/copy")).json()["thread_id"]
        await _check_in_context(c, gateway, copy)
        r = await c.post(
            f"/threads/{copy}/runs/wait", json={"assistant_id": "agent", "input": user("fork")}
        )
        assert r.status_code == 200, r.text
        await _check_in_context(c, gateway, copy)
        await _check_in_context(c, gateway, "t")
        assert len(gateway.context_ids) <= gateway.context_ids.maxsize


def _searcher(target: dict[str, str]) -> Any:
    """Calls `big_tool`, then (asked to) `search_offloaded` with a regex on its artifact."""

    def respond(messages: list[BaseMessage]) -> Any:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "use tool" in str(last.content):
            call = {"name": "big_tool", "args": {"query": "q"}, "id": "call-big"}
            return AIMessage("", tool_calls=[{**call, "type": "tool_call"}])
        if isinstance(last, HumanMessage) and "search it" in str(last.content):
            args = {"artifact_id": target["id"], "pattern": r"result ne+dle", "regex": True}
            call = {"name": "search_offloaded", "args": args, "id": "call-search"}
            return AIMessage("", tool_calls=[{**call, "type": "tool_call"}])
        return "done"

    return respond


async def test_regex_searches_from_http_are_capped_but_not_the_models(tmp_path: Path) -> None:
    target: dict[str, str] = {}
    model = ScriptedChatModel(default=_searcher(target))
    config = gateway_config(tmp_path, SETTINGS)
    async with open_app(config, scripted_factory(model, tools=[big_tool])) as (c, app):
        gateway: Gateway = app.state.gateway
        assert (await c.post("/threads", json={"thread_id": "t"})).is_success
        wait = {"assistant_id": "agent", "input": user("use tool please")}
        assert (await c.post("/threads/t/runs/wait", json=wait)).status_code == 200
        art = (await c.get("/threads/t/artifacts")).json()["artifacts"][0]["artifact_id"]
        target["id"] = art
        search = f"/threads/t/artifacts/{art}/search"
        regex = {"pattern": r"result ne+dle", "regex": "true"}

        for _ in range(MAX_REGEX_SEARCHES):  # every slot taken, as by slow searches
            await gateway.regex_searches.acquire()
        busy = await c.get(search, params=regex)
        assert busy.status_code == 429, busy.text
        assert busy.headers["retry-after"] == "2"
        detail = busy.json()["detail"]
        assert f"at most {MAX_REGEX_SEARCHES} regex" in detail and "regex=false" in detail
        plain = await c.get(search, params={"pattern": "needle"})
        assert plain.status_code == 200 and plain.json()["matches"][0]["row"] == 77
        # the agent's own tool call is not the route's: it searches while the slots are taken
        ask = {"assistant_id": "agent", "input": user("search it")}
        ran = await c.post("/threads/t/runs/wait", json=ask)
        assert ran.status_code == 200, ran.text
        state = (await c.get("/threads/t/state")).json()["values"]["messages"]
        [result] = [m for m in state if m.get("tool_call_id") == "call-search"]
        assert "row 77" in result["content"] and "needle" in result["content"], result
        assert "too many" not in result["content"]

        gateway.regex_searches.release()  # one slot free: the route runs again
        found = await c.get(search, params=regex)
        assert found.status_code == 200, found.text
        assert [m["row"] for m in found.json()["matches"]] == [77]
        # a slot freed while a request waits is taken by it, and given back after
        gateway.regex_searches.release()
        for _ in range(MAX_REGEX_SEARCHES):
            await gateway.regex_searches.acquire()
        waiting = asyncio.create_task(c.get(search, params=regex))
        await asyncio.sleep(0.05)
        gateway.regex_searches.release()
        assert (await waiting).status_code == 200
        gateway.regex_searches.release()
        assert not gateway.regex_searches.locked()
        results = await asyncio.gather(*(c.get(search, params=regex) for _ in range(3)))
        assert [r.status_code for r in results] == [200, 200, 200]  # fast ones queue briefly


async def test_failed_regex_searches_give_their_slot_back(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, SETTINGS)
    async with open_app(config, scripted_factory(ScriptedChatModel(default="ok"))) as (
        c,
        app,
    ):
        gateway: Gateway = app.state.gateway
        assert (await c.post("/threads", json={"thread_id": "t"})).is_success
        search = f"/threads/t/artifacts/art_{'0' * 24}/search"
        for pattern, status in (("(", 422), ("x+", 404)) * (MAX_REGEX_SEARCHES + 1):
            r = await c.get(search, params={"pattern": pattern, "regex": "true"})
            assert r.status_code == status, r.text
        for _ in range(MAX_REGEX_SEARCHES):  # none leaked
            await asyncio.wait_for(gateway.regex_searches.acquire(), 1)
