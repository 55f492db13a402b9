"""`FencedSqliteSaver` keeps large channel values once per version (``foldwise_channel_values``).

The same graph runs the same operations (turns, a fork, time travel) against LangGraph's plain
`SqliteSaver` and against foldwise's saver, and every read (a tuple by id, the list, the state
history) must match. A database written by the plain saver is read and extended. Through the
gateway: a one-call run writes a value row only for the checkpoints that changed the messages,
the file of a 100-turn thread is smaller, deletion removes the rows and a lost lease writes none.
A read racing a delete by another worker reads the checkpoint and its rows from one snapshot.
A `DeltaChannel`'s snapshots stay in the blob, where LangGraph's history walk reads them.
"""

from __future__ import annotations

import operator
import shutil
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from foldwise.bench._serve import open_app
from foldwise.errors import StorageError
from foldwise.gateway._checkpointer import safe_serializer
from foldwise.gateway._checkpointer_sqlite import FencedSqliteSaver
from foldwise.gateway._errors import LeaseLostError
from foldwise.gateway.storage._sqlite_conn import LoopConnection
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
WORDS = "word " * 300  # each message ~1.5 KB: the list passes 16 KiB after a few turns


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]
    steps: Annotated[int, operator.add]
    note: str


def _builder() -> StateGraph[State]:
    def think(state: State) -> dict[str, Any]:
        return {"steps": 1}

    def answer(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"re: {last.content}", id=f"re-{last.id}")], "steps": 1}

    builder = StateGraph(State)
    builder.add_node("think", think)
    builder.add_node("answer", answer)
    builder.add_edge(START, "think")
    builder.add_edge("think", "answer")
    builder.add_edge("answer", END)
    return builder


@asynccontextmanager
async def _fenced(path: Path) -> AsyncIterator[FencedSqliteSaver]:
    conn = LoopConnection(str(path))
    await conn.open()
    try:
        saver = FencedSqliteSaver(conn, serde=safe_serializer(), lease_sql=None)
        await saver.asetup()
        yield saver
    finally:
        await conn.close()


def _plain(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


def _turn(n: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {n} {WORDS}", id=f"h{n}")], "note": f"n{n}"}


def _shape(saved: CheckpointTuple) -> tuple[Any, ...]:
    """What must match between the savers (ids and versions are random per run)."""
    checkpoint = saved.checkpoint
    return (
        checkpoint["channel_values"],
        sorted(checkpoint["channel_versions"]),
        {k: v for k, v in saved.metadata.items() if k != "parents"},
        saved.parent_config is None,
        sorted((channel, repr(value)) for _, channel, value in saved.pending_writes or ()),
    )


def _ops_sync(graph: Any, config: RunnableConfig, turns: int) -> None:
    for n in range(turns):
        graph.invoke(_turn(n), config)
    history = list(graph.get_state_history(config))
    forked = graph.update_state(history[30].config, {"messages": [HumanMessage("edited", id="e")]})
    graph.invoke(None, forked)
    graph.invoke(None, history[12].config)  # time travel on the original branch
    graph.update_state(history[40].config, None, as_node="__copy__")  # as a rollback does


async def _ops_async(graph: Any, config: RunnableConfig, turns: int) -> None:
    for n in range(turns):
        await graph.ainvoke(_turn(n), config)
    history = [s async for s in graph.aget_state_history(config)]
    edit = {"messages": [HumanMessage("edited", id="e")]}
    forked = await graph.aupdate_state(history[30].config, edit)
    await graph.ainvoke(None, forked)
    await graph.ainvoke(None, history[12].config)
    await graph.aupdate_state(history[40].config, None, as_node="__copy__")


async def _read_all(saver: FencedSqliteSaver, graph: Any, config: RunnableConfig) -> Any:
    listed = [saved async for saved in saver.alist(config)]
    by_id = [await saver.aget_tuple(saved.config) for saved in listed]
    head = await saver.aget_tuple(config)
    history = [(s.values, s.next) async for s in graph.aget_state_history(config)]
    return listed, by_id, head, history


def _value_rows(path: Path, thread_id: str | None = None) -> int:
    with sqlite3.connect(str(path)) as conn:
        sql = "SELECT count(*) FROM foldwise_channel_values"
        if thread_id is None:
            return int(conn.execute(sql).fetchone()[0])
        return int(conn.execute(sql + " WHERE thread_id = ?", (thread_id,)).fetchone()[0])


async def test_every_read_equals_langgraphs_sqlite_saver(tmp_path: Path) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    plain = _plain(tmp_path / "plain.db")
    plain_graph = _builder().compile(checkpointer=plain)
    _ops_sync(plain_graph, config, 30)
    expected = [_shape(saved) for saved in plain.list(config)]
    expected_history = [(s.values, s.next) for s in plain_graph.get_state_history(config)]
    async with _fenced(tmp_path / "fenced.db") as saver:
        graph = _builder().compile(checkpointer=saver)
        await _ops_async(graph, config, 30)
        listed, by_id, head, history = await _read_all(saver, graph, config)
    assert len(listed) == len(expected) > 90
    assert [_shape(saved) for saved in listed] == expected
    assert [_shape(saved) for saved in by_id if saved is not None] == expected
    assert head is not None and _shape(head) == expected[0]
    assert history == expected_history
    rows = _value_rows(tmp_path / "fenced.db")
    assert 0 < rows < len(listed) // 2  # the message list, once per version that held it


async def test_a_database_of_the_plain_saver_is_read_and_extended(tmp_path: Path) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    old = tmp_path / "old.db"
    plain = _plain(old)
    plain_graph = _builder().compile(checkpointer=plain)
    for n in range(20):
        plain_graph.invoke(_turn(n), config)
    plain.conn.close()
    shutil.copy(old, tmp_path / "reference.db")
    reference = _plain(tmp_path / "reference.db")
    reference_graph = _builder().compile(checkpointer=reference)
    before = [_shape(saved) for saved in reference.list(config)]
    async with _fenced(old) as saver:
        graph = _builder().compile(checkpointer=saver)
        assert [_shape(saved) async for saved in saver.alist(config)] == before
        history = [s async for s in graph.aget_state_history(config)]
        for n in range(20, 25):
            await graph.ainvoke(_turn(n), config)
        await graph.ainvoke(None, history[5].config)  # from an old-format checkpoint
        listed, by_id, _, _ = await _read_all(saver, graph, config)
    reference_history = list(reference_graph.get_state_history(config))
    for n in range(20, 25):
        reference_graph.invoke(_turn(n), config)
    reference_graph.invoke(None, reference_history[5].config)
    expected = [_shape(saved) for saved in reference.list(config)]
    assert [_shape(saved) for saved in listed] == expected
    assert [_shape(saved) for saved in by_id if saved is not None] == expected
    assert _value_rows(old) > 0


async def test_a_missing_row_is_an_error_naming_thread_channel_and_version(
    tmp_path: Path,
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t-missing"}}
    async with _fenced(tmp_path / "f.db") as saver:
        graph = _builder().compile(checkpointer=saver)
        for n in range(15):
            await graph.ainvoke(_turn(n), config)
        head = await saver.aget_tuple(config)
        assert head is not None
        version = head.checkpoint["channel_versions"]["messages"]
        saver.loop_conn.execute("DELETE FROM foldwise_channel_values")
        with pytest.raises(StorageError, match=rf"t-missing.*'messages'.*{version}"):
            await saver.aget_tuple(config)


def _concat(state: list[str] | None, writes: Sequence[Any]) -> list[str]:
    return [*(state or []), *(item for write in writes for item in write)]


class DeltaState(TypedDict):
    log: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=3)]


def _delta_graph(checkpointer: Any) -> Any:
    def add(state: DeltaState) -> dict[str, Any]:
        return {"log": [f"{len(state['log'])} {WORDS * 4}"]}

    builder = StateGraph(DeltaState)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder.compile(checkpointer=checkpointer)


async def test_delta_channel_snapshots_stay_in_the_blob_for_langgraphs_history_walk(
    tmp_path: Path,
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    plain_graph = _delta_graph(_plain(tmp_path / "plain.db"))
    for n in range(9):
        plain_graph.invoke({"log": [f"in{n}"]}, config)
    history = list(plain_graph.get_state_history(config))
    plain_graph.invoke(None, history[7].config)
    plain_graph.update_state(history[5].config, {"log": ["edit"]})
    expected = [s.values for s in plain_graph.get_state_history(config)]
    async with _fenced(tmp_path / "fenced.db") as saver:
        graph = _delta_graph(saver)
        for n in range(9):
            await graph.ainvoke({"log": [f"in{n}"]}, config)
        history = [s async for s in graph.aget_state_history(config)]
        await graph.ainvoke(None, history[7].config)
        await graph.aupdate_state(history[5].config, {"log": ["edit"]})
        assert [s.values async for s in graph.aget_state_history(config)] == expected
    assert len(expected[0]["log"]) > 12  # snapshots of 16 KiB and more
    assert _value_rows(tmp_path / "fenced.db") == 0


class _DeletedMeanwhile(FencedSqliteSaver):
    """Another process (a second connection) deletes the thread once its checkpoint is read."""

    other: sqlite3.Connection

    def _with_rows(self, found: CheckpointTuple) -> CheckpointTuple:
        thread = found.config["configurable"]["thread_id"]
        for table in ("checkpoints", "writes", "foldwise_channel_values"):
            self.other.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread,))
        return super()._with_rows(found)


async def test_a_read_racing_a_delete_by_another_worker_is_read_from_one_snapshot(
    tmp_path: Path,
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    path = tmp_path / "f.db"
    for read in ("get", "list"):
        async with _fenced(path) as saver:  # the thread (again, after the first read)
            graph = _builder().compile(checkpointer=saver)
            for n in range(24):
                await graph.ainvoke(_turn(n), config)
        conn = LoopConnection(str(path))
        await conn.open()
        racing = _DeletedMeanwhile(conn, serde=safe_serializer(), lease_sql=None)
        racing.other = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            if read == "get":
                found = await racing.aget_tuple(config)
            else:  # the listing's last tuple: the listing statement has ended
                (found,) = [saved async for saved in racing.alist(config, limit=1)]
        finally:
            racing.other.close()
            await conn.close()
        assert found is not None
        assert len(found.checkpoint["channel_values"]["messages"]) == 48


async def _wait(client: Any, thread: str, text: str) -> None:
    response = await client.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(text)}
    )
    assert response.status_code == 200, response.text


def _count(saver: FencedSqliteSaver, table: str, thread: str) -> int:
    row = saver.loop_conn.fetchone(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread,))
    assert row is not None
    return int(row[0])


@asynccontextmanager
async def _thread_of(tmp_path: Path, turns: int) -> AsyncIterator[tuple[Any, Any, str]]:
    """The app's client, its checkpointer and a thread of `turns` long turns."""
    model = ScriptedChatModel(default="ok " * 200)
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        for turn in range(turns):
            await _wait(c, thread, f"turn {turn} {WORDS}")
        yield c, app.state.gateway.checkpointer, thread


async def test_a_run_writes_a_row_per_change_of_the_messages_and_deletion_removes_them(
    tmp_path: Path,
) -> None:
    async with _thread_of(tmp_path, 30) as (c, saver, thread):
        rows, checkpoints = (
            _count(saver, "foldwise_channel_values", thread),
            _count(saver, "checkpoints", thread),
        )
        await _wait(c, thread, "one more")  # 60 messages before it
        assert _count(saver, "checkpoints", thread) - checkpoints == 4
        assert _count(saver, "foldwise_channel_values", thread) - rows == 2  # input, answer
        blobs = saver.loop_conn.fetchall(
            "SELECT length(checkpoint) FROM checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id DESC LIMIT 4",
            (thread,),
        )
        assert max(size for (size,) in blobs) < 4096, blobs  # none holds the messages
        other = (await c.post("/threads", json={})).json()["thread_id"]
        await _wait(c, other, WORDS * 12)
        assert (await c.delete(f"/threads/{thread}")).status_code in (200, 204)
        assert _count(saver, "foldwise_channel_values", thread) == 0
        assert _count(saver, "foldwise_channel_values", other) > 0


async def test_a_copied_thread_reads_the_same_after_its_source_is_deleted(
    tmp_path: Path,
) -> None:
    async with _thread_of(tmp_path, 12) as (c, saver, thread):
        source = [_shape(s) async for s in saver.alist({"configurable": {"thread_id": thread}})]
        copy = (await c.post(f"/threads/{thread}/copy")).json()["thread_id"]
        assert (await c.delete(f"/threads/{thread}")).status_code in (200, 204)
        copied = [_shape(s) async for s in saver.alist({"configurable": {"thread_id": copy}})]
        assert copied == source and _count(saver, "foldwise_channel_values", copy) > 0
        state = (await c.get(f"/threads/{copy}/state")).json()
        assert len(state["values"]["messages"]) == 24


async def test_nothing_is_written_under_a_lost_lease(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        await _wait(c, thread, WORDS * 12)
        gateway = app.state.gateway
        saver = gateway.checkpointer
        head = await saver.aget_tuple({"configurable": {"thread_id": thread}})
        assert head is not None
        rows = _count(saver, "foldwise_channel_values", thread)
        await gateway.leases.acquire(thread, "old-holder", "run")
        fenced = {**head.config["configurable"], **gateway.leases.fence(thread, "old-holder")}
        await gateway.leases.release(thread, "old-holder")  # the holder lost its lease
        checkpoint = dict(head.checkpoint)
        checkpoint["id"] = head.checkpoint["id"][:-4] + "ffff"
        messages = [*head.checkpoint["channel_values"]["messages"], HumanMessage(WORDS)]
        checkpoint["channel_values"] = {**head.checkpoint["channel_values"], "messages": messages}
        checkpoint["channel_versions"] = {**head.checkpoint["channel_versions"], "messages": "99"}
        with pytest.raises(LeaseLostError):
            await saver.aput(
                {"configurable": fenced}, checkpoint, head.metadata, {"messages": "99"}
            )
        assert _count(saver, "foldwise_channel_values", thread) == rows


async def test_a_hundred_turn_thread_file_is_smaller(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok " * 50)
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        saver = app.state.gateway.checkpointer
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        for turn in range(100):
            await _wait(c, thread, f"turn {turn} " + "word " * 60)
        sizes = saver.loop_conn.fetchone(
            "SELECT (SELECT sum(length(checkpoint)) FROM checkpoints), "
            "(SELECT sum(length(value)) FROM foldwise_channel_values), "
            "(SELECT max(length(value)) FROM foldwise_channel_values)"
        )
    assert sizes is not None
    blobs, values, largest = sizes
    # All inline (main): about 4 checkpoints per turn, each with the whole list; here the list
    # is stored twice per turn and the blobs stay small.
    # Inline (main's format) it is about 4 * sum of the list's sizes, about 200 * largest;
    # measured here: about 108 * largest.
    assert blobs + values < 125 * largest, sizes
    assert blobs < 100 * 4 * 4096, sizes
