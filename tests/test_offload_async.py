"""The async offload path uses only async store methods; every offload shares one thread id.

Issue 10 item 1: with an async-only LangGraph store (an `AsyncBatchedBaseStore` such as
`AsyncPostgresStore`) every store call on the async path must be an `a`-method. Item 6: with no
checkpointer, archives and the read/search tools must resolve the same thread.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime

import foldwise
from foldwise._steps import given_sync, run_async
from foldwise._thread_id import NO_THREAD, resolve_thread_id
from foldwise.config import parse_config
from foldwise.errors import StorageError
from foldwise.messages import OFFLOAD_FLAG
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware
from foldwise.offload import FilesystemArtifactStore, StoreArtifactStore
from foldwise.testing import ScriptedChatModel
from tests.support.async_only_store import AsyncOnlyStore

ART = re.compile(r"art_[0-9a-f]{24}")
THREAD = {"configurable": {"thread_id": "th-async"}}


def _text(lines: int, marker: str) -> str:
    body = [f"{i:05d} result row with some words " + "pad " * (i % 7) for i in range(lines)]
    body.insert(lines // 2, f"the marker is {marker}")
    return "\n".join(body)


# -- the store API --------------------------------------------------------------------------


async def test_store_async_methods_never_call_the_sync_store() -> None:
    backend = AsyncOnlyStore()
    store = StoreArtifactStore(backend, chunk_chars=1000, max_bytes_per_thread=100_000)
    text = _text(2000, "KIWI-9")
    ref = await store.aput("t", text, source="tool", kind="tool")
    assert (await store.aput("t", text, source="tool", kind="tool")).artifact_id == ref.artifact_id
    assert await store.aget("t", ref.artifact_id) == text
    assert (await store.aget_ref("t", ref.artifact_id)).chars == len(text)
    page = await store.aread_page("t", ref.artifact_id, offset=1000, limit=2)
    assert [row.index for row in page.rows] == [1000, 1001] and page.next_offset == 1002
    plain = await store.asearch("t", ref.artifact_id, "KIWI-9")
    regex = await store.asearch("t", ref.artifact_id, r"KIWI-\d", regex=True)
    assert [m.row for m in plain.matches] == [m.row for m in regex.matches] == [1000]
    assert [r.artifact_id for r in await store.alist("t")] == [ref.artifact_id]
    # The quota evicts the oldest artifact; gc and delete_thread walk every namespace.
    second = await store.aput("t", _text(2000, "PEAR-2"), source="tool", kind="tool")
    assert [r.artifact_id for r in await store.alist("t")] == [second.artifact_id]
    assert (await store.agc(max_age=timedelta(days=1))).errors == ()
    assert [r.artifact_id for r in await store.adelete_thread("t")] == [second.artifact_id]
    assert await store.adelete("t", ref.artifact_id) is False
    assert backend.sync_calls == [] and backend.async_calls > 0
    with pytest.raises(StorageError, match="sync store call"):  # the double refuses them
        store.list("t")


async def test_async_regex_search_leaves_the_event_loop_free() -> None:
    store = StoreArtifactStore(AsyncOnlyStore())
    ref = await store.aput("t", "a" * 40 + "\n", source="tool", kind="tool")
    search = asyncio.create_task(
        store.asearch("t", ref.artifact_id, "(a|a)*!", regex=True, timeout_seconds=0.5)
    )

    async def probe() -> bool:
        await asyncio.sleep(0)
        return search.done()

    # The in-memory store never suspends; only the worker process is awaited. Had the search
    # blocked the loop, it would be finished before the probe ran.
    assert await asyncio.create_task(probe()) is False
    result = await search
    assert not result.complete and result.stopped_reason == "time budget"


# -- the middleware and its tools -------------------------------------------------------------


def _request(name: str) -> ToolCallRequest:
    from tests.test_offload_middleware import runtime_for

    return ToolCallRequest(
        tool_call={"name": name, "args": {}, "id": "c1", "type": "tool_call"},
        tool=None,
        state={},
        runtime=runtime_for("t1"),
    )


async def test_middleware_async_path_uses_only_async_store_methods() -> None:
    backend = AsyncOnlyStore()
    middleware = ToolOutputOffloadMiddleware(store=backend, human_token_limit=100)
    text = _text(3000, "PLUM-5")

    async def handler(request: ToolCallRequest) -> ToolMessage:
        return ToolMessage(text, tool_call_id="c1", name="dump", id="m1")

    result = await middleware.awrap_tool_call(_request("dump"), handler)
    assert not isinstance(result, ToolMessage)
    (message,) = result.update["messages"]
    ref = message.additional_kwargs[OFFLOAD_FLAG]
    update = await middleware.abefore_model(
        {"messages": [HumanMessage("pasted " * 500, id="h1")]}, Runtime()
    )
    assert update is not None and update["offloads"][0]["thread_id"] == NO_THREAD
    stored = await run_async(middleware.offload_user_message_steps(HumanMessage("x " * 99), "t1"))
    archived = await run_async(
        middleware.archive_steps([HumanMessage("keep PLUM-5"), AIMessage("noted")], "t1")
    )
    assert stored is not None and archived is not None
    read, search = middleware.tools
    runtime = _request("x").runtime
    found = await search.ainvoke(
        {"artifact_id": archived["artifact_id"], "pattern": "PLUM-5", "runtime": runtime}
    )
    assert "keep PLUM-5" in found
    page = await read.ainvoke(
        {"artifact_id": ref["artifact_id"], "offset": 1500, "limit": 1, "runtime": runtime}
    )
    assert "the marker is PLUM-5" in page
    assert backend.sync_calls == []


async def test_handler_given_for_one_driver_is_refused_by_the_other(tmp_path: Path) -> None:
    middleware = ToolOutputOffloadMiddleware(store=FilesystemArtifactStore(tmp_path))

    def handler(request: ToolCallRequest) -> ToolMessage:
        raise AssertionError("never called")

    steps = middleware.wrap_tool_call_steps(_request("dump"), given_sync(handler, _request("x")))
    with pytest.raises(RuntimeError, match="other"):
        await run_async(steps)


# -- whole agents ----------------------------------------------------------------------------

HUGE = _text(6000, "MANGO-77")


@tool
def dump_table(name: str) -> str:
    """Dump a table."""
    return HUGE


def _last_tool_text(messages: list[BaseMessage]) -> str:
    last = messages[-1]
    assert isinstance(last, ToolMessage)
    return last.text


def _agent_brain(messages: list[BaseMessage]) -> AIMessage:
    """dump_table -> search_offloaded(its artifact) -> read_offloaded(the match) -> answer."""
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    if not tool_messages:
        call = {"name": "dump_table", "args": {"name": "t"}, "id": "c1"}
    elif len(tool_messages) == 1:
        artifact_id = ART.findall(_last_tool_text(messages))[0]
        args = {"artifact_id": artifact_id, "pattern": "MANGO-77"}
        call = {"name": "search_offloaded", "args": args, "id": "c2"}
    elif len(tool_messages) == 2:
        artifact_id = ART.findall(_last_tool_text(messages))[0]
        row = int(re.search(r"^\s*(\d+): ", _last_tool_text(messages), re.M).group(1))  # type: ignore[union-attr]
        args = {"artifact_id": artifact_id, "offset": row - 1, "limit": 1}
        call = {"name": "read_offloaded", "args": args, "id": "c3"}
    else:
        return AIMessage("found: " + _last_tool_text(messages).splitlines()[1])
    return AIMessage("", tool_calls=[call])


async def test_agent_with_async_only_store_offloads_and_reads_tool_output(tmp_path: Path) -> None:
    backend = AsyncOnlyStore()
    config = parse_config({"offload": {"root": str(tmp_path / "unused")}})
    agent = foldwise.create_agent(
        config, model=ScriptedChatModel(default=_agent_brain), tools=[dump_table], store=backend
    )
    out = await agent.ainvoke({"messages": [HumanMessage("find the marker")]}, THREAD)
    assert out["messages"][-1].text.endswith("the marker is MANGO-77")
    (event,) = out["offloads"]
    assert event["kind"] == "tool" and event["thread_id"] == "th-async"
    assert backend.sync_calls == []
    assert not (tmp_path / "unused").exists()


def _compaction_config(root: Path, **summarization: Any) -> Any:
    return parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "model_name": "extractive",
                **summarization,
            },
            "offload": {"root": str(root)},
        }
    )


async def test_agent_with_async_only_store_archives_and_offloads_input(tmp_path: Path) -> None:
    backend = AsyncOnlyStore()
    config = _compaction_config(tmp_path / "unused", preserve_human={"max_tokens": 40})
    model = ScriptedChatModel(default="ok " * 50)
    agent = foldwise.create_agent(config, model=model, store=backend, checkpointer=InMemorySaver())
    note = "note: the vault code is ZX-4471. " + "Background detail. " * 400
    await agent.ainvoke({"messages": [HumanMessage(note)]}, THREAD)
    for i in range(4):
        await agent.ainvoke({"messages": [HumanMessage(f"step {i}")]}, THREAD)
    receipt = (await agent.aget_state(THREAD)).values["compactions"][0]
    store = StoreArtifactStore(backend)
    assert receipt["archive_id"], "the compacted span is archived through the async store"
    assert "ok ok" in await store.aget("th-async", receipt["archive_id"])
    (offloaded,) = receipt["offloaded_ids"]
    assert await store.aget("th-async", offloaded) == note
    assert backend.sync_calls == []


# -- item 6: one thread id without a checkpointer ----------------------------------------------


def _archive_brain(messages: list[BaseMessage]) -> AIMessage:
    """Small lookups until an archive is advertised, then search it, then answer."""
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    if tool_messages and tool_messages[-1].name == "search_offloaded":
        return AIMessage("search said: " + tool_messages[-1].text)
    advertised = ART.findall("\n".join(str(m.content) for m in messages))
    if advertised:
        args = {"artifact_id": advertised[0], "pattern": "vault code"}
        return AIMessage("", tool_calls=[{"name": "search_offloaded", "args": args, "id": "s1"}])
    n = len(tool_messages) + 1
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"n": n}, "id": f"l{n}"}])


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return "lookup 1: the vault code is ZX-4471" if n == 1 else f"lookup {n}: nothing special"


def _no_checkpointer_agent(tmp_path: Path) -> Any:
    config = _compaction_config(tmp_path / "artifacts")
    model = ScriptedChatModel(default=_archive_brain)
    return foldwise.create_agent(config, model=model, tools=[lookup])


def _check_archive_found(out: dict[str, Any]) -> None:
    answer = out["messages"][-1].text
    assert answer.startswith("search said: ") and "Error" not in answer, answer
    assert "the vault code is ZX-4471" in answer
    archives = [o for o in out["offloads"] if o["kind"] == "archive"]
    assert archives and {a["thread_id"] for a in archives} == {NO_THREAD}


def test_archive_without_checkpointer_is_searchable(tmp_path: Path) -> None:
    agent = _no_checkpointer_agent(tmp_path)
    _check_archive_found(agent.invoke({"messages": [HumanMessage("look things up")]}))


async def test_archive_without_checkpointer_is_searchable_async(tmp_path: Path) -> None:
    agent = _no_checkpointer_agent(tmp_path)
    out = await agent.ainvoke({"messages": [HumanMessage("look things up")]})
    _check_archive_found(out)


def test_resolve_thread_id_sources() -> None:
    assert resolve_thread_id() == NO_THREAD
    assert resolve_thread_id({"configurable": {"thread_id": 7}}) == "7"
    assert resolve_thread_id({"configurable": {"thread_id": ""}}) == NO_THREAD
    from tests.test_offload_middleware import runtime_for

    assert resolve_thread_id(runtime_for("tool-thread")) == "tool-thread"
    assert resolve_thread_id(Runtime()) == NO_THREAD


@pytest.mark.postgres
async def test_agent_with_async_postgres_store(tmp_path: Path) -> None:
    import psycopg
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import sql

    from tests.support.gateway import drop_schema, postgres_url

    _, dsn, schema = postgres_url()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        url = f"{dsn}?options=-csearch_path%3D{schema}"
        async with AsyncPostgresStore.from_conn_string(url) as backend:
            await backend.setup()
            config = parse_config({"offload": {"root": str(tmp_path / "unused")}})
            model = ScriptedChatModel(default=_agent_brain)
            agent = foldwise.create_agent(config, model=model, tools=[dump_table], store=backend)
            out = await agent.ainvoke({"messages": [HumanMessage("find the marker")]}, THREAD)
            assert out["messages"][-1].text.endswith("the marker is MANGO-77")
            (event,) = out["offloads"]
            stored = await StoreArtifactStore(backend).aget("th-async", event["artifact_id"])
            assert stored == HUGE
    finally:
        drop_schema(dsn, schema)
