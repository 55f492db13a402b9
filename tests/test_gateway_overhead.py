"""Issue 16: the gateway's per-run overhead, pinned by counts (never by wall-clock time).

A `runs/wait` on SQLite is counted from the SQL both connections execute (a trace hook on
each): transactions (each commit syncs the WAL), statements run in the connections' worker
threads (the rest run inline on the event loop), and what a run start renders for the
transcript. Each count fails if the optimisation it pins regresses.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.types import interrupt

import foldwise.gateway._messages as gateway_messages
from foldwise.bench._serve import open_app
from foldwise.gateway._capture import TranscriptRecorder
from foldwise.gateway.storage import SqliteGatewayStorage
from foldwise.testing import FailingChatModel, ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


class SqlCounter:
    """Counts the statements of the gateway's two SQLite connections, by first keyword."""

    def __init__(self, app: Any) -> None:
        gateway = app.state.gateway
        storage = gateway.storage
        assert isinstance(storage, SqliteGatewayStorage)
        assert storage.connection is not None
        self.connections = {
            "storage": storage.connection,
            "checkpoints": gateway.checkpointer.loop_conn,
        }
        self.counts: dict[str, Counter[str]] = {name: Counter() for name in self.connections}
        self.threaded: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()  # checkpoint reads: one worker call each
        for name, conn in self.connections.items():
            conn.conn.set_trace_callback(self._tracer(name))
            original = conn.run

            async def run(fn: Any, *args: Any, _name: str = name, _run: Any = original) -> Any:
                is_statement = getattr(fn, "__self__", None) is self.connections[_name]
                (self.threaded if is_statement else self.reads)[_name] += 1
                return await _run(fn, *args)

            conn.run = run  # type: ignore[method-assign]

    def _tracer(self, name: str) -> Any:
        def trace(statement: str) -> None:
            words = statement.split()
            self.counts[name][words[0].upper()] += 1
            if words[0].upper() == "INSERT":  # INSERT OR REPLACE INTO <table>
                self.counts[name][f"INSERT {words[4] if words[1] == 'OR' else words[2]}"] += 1

        return trace

    def reset(self) -> None:
        for counts in self.counts.values():
            counts.clear()
        self.threaded.clear()
        self.reads.clear()


async def _wait(client: Any, thread: str, text: str) -> dict[str, Any]:
    response = await client.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(text)}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_run_costs_one_transaction_per_storage_step_and_one_thread_hop_each(
    tmp_path: Path,
) -> None:
    model = ScriptedChatModel(default="ok")
    config = gateway_config(tmp_path, QUIET)
    async with open_app(config, scripted_factory(model)) as (client, app):
        sql = SqlCounter(app)
        thread = (await client.post("/threads", json={})).json()["thread_id"]
        await _wait(client, thread, "warm up")
        sql.reset()
        values = await _wait(client, thread, "hello")
        assert [m["type"] for m in values["messages"]][-2:] == ["human", "ai"]
        storage, checkpoints = sql.counts["storage"], sql.counts["checkpoints"]
        # Storage: lease taken; run row + thread busy + input (one); the answer; run row
        # finished + thread idle (one); lease released. Before issue 16: eight.
        assert storage["COMMIT"] == 5, storage
        # Checkpoints: one transaction per step, its task writes committed with its checkpoint
        # (before issue 16: one for the writes and one for the checkpoint).
        steps = checkpoints["INSERT checkpoints"]
        # input, start, foldwise's before_model (run start included), model: the middleware
        # runs fused, one node per hook kind (8 steps before).
        assert steps == 4, checkpoints
        assert checkpoints["INSERT writes"] >= steps, checkpoints
        assert checkpoints["COMMIT"] == steps, checkpoints
        # Of the statements, only COMMIT leaves the event loop, and BEGIN IMMEDIATE when the
        # other connection holds the writer lock: tried inline first, it is tried again in the
        # worker thread, where it may wait (aiosqlite: every call left the loop).
        transactions = busy = 0
        for name, counts in sql.counts.items():
            retried = counts["BEGIN"] - counts["COMMIT"]
            assert sql.threaded[name] == counts["COMMIT"] + retried, (name, counts)
            transactions, busy = transactions + counts["COMMIT"], busy + retried
        assert busy <= transactions // 4, sql.counts  # the lock is mostly free
        assert sql.reads == {"checkpoints": 2}, sql.reads  # the run's start and its answer
        # Each read is one read transaction (its checkpoint and value rows, one snapshot).
        assert checkpoints["SAVEPOINT"] == checkpoints["RELEASE"] == 2, checkpoints


async def test_a_run_start_renders_only_new_messages_for_the_transcript(
    tmp_path: Path, monkeypatch: Any
) -> None:
    model = ScriptedChatModel(default="ok")
    rendered: list[str] = []
    original = gateway_messages.message_record

    def counting(message: BaseMessage) -> dict[str, Any]:
        rendered.append(str(message.id))
        return original(message)

    # The recorder renders through the name it imported; count there.
    import foldwise.gateway._capture as capture

    monkeypatch.setattr(capture, "message_record", counting)
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        per_turn = []
        for turn in range(12):
            rendered.clear()
            await _wait(c, thread, f"turn {turn}")
            per_turn.append(len(rendered))
        # Each turn renders its input and its answer, whatever the history length.
        assert per_turn == [2] * 12, per_turn
        stored = await app.state.gateway.storage.list_transcript(thread, limit=100)
        assert [e.message["type"] for e in stored] == ["human", "ai"] * 12


async def test_reconcile_still_records_what_a_crash_left_in_the_state_only(
    tmp_path: Path,
) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        await _wait(c, thread, "one")
        storage = app.state.gateway.storage
        graph = app.state.gateway.agents.get("agent", None).graph
        state = await graph.aget_state({"configurable": {"thread_id": thread}})
        answer = str(state.values["messages"][-1].id)
        # As a crash between the checkpoint commit and the transcript write leaves it: the
        # answer is in the state only (removed behind the storage's back).
        storage.connection.execute("DELETE FROM transcript_events WHERE message_id = ?", (answer,))
        assert await storage.stored_message_ids(thread, [answer]) == set()
        recorder = TranscriptRecorder(storage, thread, None)
        assert await recorder.reconcile(state.values) == 1
        assert await storage.stored_message_ids(thread, [answer]) == {answer}
        assert await recorder.reconcile(state.values) == 0  # nothing missing: nothing written


@tool
def ask_human(question: str) -> str:
    """Ask the human a question and wait for the answer."""
    return str(interrupt({"question": question}))


async def test_writes_no_checkpoint_takes_along_are_committed_when_the_run_ends(
    tmp_path: Path,
) -> None:
    call = AIMessage("", tool_calls=[{"name": "ask_human", "args": {"question": "ok?"}, "id": "q"}])
    model = ScriptedChatModel(responses=[call])
    factory = scripted_factory(model, tools=[ask_human])
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        await _wait(c, thread, "please ask")
        saver = app.state.gateway.checkpointer
        # Read behind the saver's back: the interrupt's write is in the table, not only held.
        rows = saver.loop_conn.fetchall(
            "SELECT channel FROM writes WHERE thread_id = ? AND channel = '__interrupt__'",
            (thread,),
        )
        assert len(rows) == 1
        assert (await c.get(f"/threads/{thread}")).json()["status"] == "interrupted"


async def test_a_failed_steps_error_write_is_committed_when_the_run_ends(tmp_path: Path) -> None:
    factory = scripted_factory(FailingChatModel())
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        response = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("hi")}
        )
        assert response.status_code >= 500
        saver = app.state.gateway.checkpointer
        # No checkpoint follows a failed step: the run's end commits its error write.
        rows = saver.loop_conn.fetchall(
            "SELECT channel FROM writes WHERE thread_id = ? AND channel = '__error__'", (thread,)
        )
        assert len(rows) == 1


async def test_writes_held_under_a_lost_lease_are_never_written(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        await _wait(c, thread, "hello")
        gateway = app.state.gateway
        saver = gateway.checkpointer
        head = await saver.aget_tuple({"configurable": {"thread_id": thread}})
        assert head is not None
        old = await gateway.leases.acquire(thread, "old-holder", "run")
        config = {
            "configurable": {
                **head.config["configurable"],
                **gateway.leases.fence(thread, "old-holder"),
            }
        }
        await saver.aput_writes(config, [("stale", "value")], "task-1")  # held, not written
        await gateway.leases.release(thread, "old-holder")  # the holder lost its lease
        new = await gateway.leases.acquire(thread, "new-holder", "run")
        assert new.token == old.token + 1
        # The next read of the thread settles the held write: its lease is gone, so it is
        # dropped, never written under the new holder's lease.
        await saver.aget_tuple({"configurable": {"thread_id": thread}})
        rows = saver.loop_conn.fetchall(
            "SELECT channel FROM writes WHERE thread_id = ? AND channel = 'stale'", (thread,)
        )
        assert rows == []
        await gateway.leases.release(thread, "new-holder")


async def test_a_run_decodes_the_head_checkpoint_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The gateway's input check and LangGraph's loop read the head; it is decoded once."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    model = ScriptedChatModel(default="ok " * 200)
    decoded: list[int] = []
    original = JsonPlusSerializer.loads_typed

    def counting(self: Any, data: tuple[str, bytes]) -> Any:
        if len(data[1]) >= 16 * 1024:
            decoded.append(len(data[1]))
        return original(self, data)

    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", counting)
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _app):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        for turn in range(30):
            await _wait(c, thread, f"turn {turn} " + "word " * 100)
        decoded.clear()
        values = await _wait(c, thread, "one more")
        assert len(values["messages"]) == 62
        assert len(decoded) == 1, decoded  # was 2: the same blob decoded by each reader


def _calls(dependant: Any) -> list[Any]:
    """Every callable FastAPI calls for a route: its dependencies' (nested), then the route's."""
    found: list[Any] = []
    for sub in dependant.dependencies:
        found += _calls(sub)
    return [*found, dependant.call]


def test_no_route_or_dependency_leaves_the_event_loop(tmp_path: Path) -> None:
    """FastAPI runs a plain ``def`` endpoint or dependency in a worker thread: one round trip
    between threads per call. The gateway's are all ``async def`` (none blocks)."""
    import inspect

    from fastapi.routing import APIRoute
    from starlette.routing import Route

    from foldwise.gateway import create_app

    app = create_app(gateway_config(tmp_path, {"memory": {"enabled": True}}))
    routes: list[APIRoute] = []
    plain: list[Route] = []  # FastAPI's own /docs, /redoc, /openapi.json
    pending = list(app.routes)
    while pending:  # FastAPI 0.165 lists an included router as one entry
        route = pending.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            pending += included.routes
        elif isinstance(route, APIRoute):
            routes.append(route)
        else:  # a Mount, a WebSocket route...: walk it here before allowing it
            assert type(route) is Route, route
            plain.append(route)
    assert len(routes) > 40
    sync = {
        f"{route.path}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in _calls(route.dependant)
        if call is not None and not inspect.iscoroutinefunction(call)
    }
    sync |= {r.path for r in plain if not inspect.iscoroutinefunction(r.endpoint)}
    sync |= {  # Starlette runs a plain ``def`` exception handler in a worker thread too
        f"handler {key}: {handler.__qualname__}"
        for key, handler in app.exception_handlers.items()
        if not inspect.iscoroutinefunction(handler)
    }
    assert not sync, sorted(sync)
