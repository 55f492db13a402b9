"""Leases fence writes: a worker that lost its thread's lease cannot write the thread.

The takeover is simulated the way it happens in production: the lease is released on the
stalled worker's behalf (as if it had expired) and another holder takes it, between the
stalled worker's last check and its write. Runs on SQLite and on Postgres.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from psycopg import sql

from foldwise.bench._serve import open_app
from foldwise.gateway.storage import MIGRATIONS, open_storage
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import (
    drop_schema,
    gateway_config,
    is_summarizer_call,
    postgres_url,
    scripted_factory,
    user,
)

MANUAL_ONLY = {
    "summarization": {
        "trigger": {"type": "messages", "value": 1000},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "none"},
    }
}


async def take_over(url: str, thread_id: str) -> None:
    """Another worker takes the thread: the lease row passes to `intruder`, live for 60 s.

    One statement behind the gateway's back, as the database would see an expired lease taken
    over, so no write of the stalled operation can fall between a release and the takeover.
    """
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///") :]

        def overwrite() -> int:
            with closing(sqlite3.connect(path, timeout=5)) as conn, conn:
                return conn.execute(
                    "UPDATE thread_locks SET holder = 'intruder', expires_at = ? "
                    "WHERE thread_id = ?",
                    (time.time() + 60, thread_id),
                ).rowcount

        assert await asyncio.to_thread(overwrite) == 1
        return
    dsn, schema = url.split("?schema=")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL(
                "UPDATE {}.thread_locks SET holder = 'intruder', "
                "expires_at = clock_timestamp() + interval '60 seconds' WHERE thread_id = %s"
            ).format(sql.Identifier(schema)),
            (thread_id,),
        )
        assert cursor.rowcount == 1


async def test_a_run_that_lost_its_lease_cannot_write_its_checkpoint(
    tmp_path: Path, storage_url: str
) -> None:
    gateway: dict[str, Any] = {}

    @tool
    async def slow_step(thread: str) -> str:
        """A step during which this worker stalls past its lease and another takes over."""
        await take_over(storage_url, thread)
        return "done after the stall"

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("final answer")
        thread = str(messages[-1].content)
        return AIMessage(
            "", tool_calls=[{"name": "slow_step", "args": {"thread": thread}, "id": "c1"}]
        )

    config = gateway_config(tmp_path, {"storage": {"url": storage_url}})
    factory = scripted_factory(ScriptedChatModel(default=brain), tools=[slow_step])
    async with open_app(config, factory) as (c, app):
        gateway["storage"] = app.state.gateway.storage
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        r = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(thread)}
        )
        assert r.status_code == 409, r.text
        assert "lease on the thread was lost" in r.json()["detail"]
        state = (await c.get(f"/threads/{thread}/state")).json()
        contents = [m["content"] for m in state["values"]["messages"]]
        # Nothing written after the takeover: neither the tool's result nor the final answer.
        assert "done after the stall" not in contents
        assert "final answer" not in contents
        # Nor in the transcript, which the new holder now writes (any durability mode).
        entries = (await c.get(f"/threads/{thread}/transcript")).json()["entries"]
        recorded = [(e.get("message") or {}).get("content") for e in entries]
        assert "done after the stall" not in recorded
        assert "final answer" not in recorded
        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert [run["status"] for run in runs] == ["error"]
        lock = await gateway["storage"].get_thread_lock(thread)
        assert lock is not None and lock.holder == "intruder"  # the new holder keeps the thread


async def test_a_compaction_that_lost_its_lease_leaves_the_thread_and_receipts_alone(
    tmp_path: Path, storage_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def respond(messages: list[BaseMessage]) -> str:
        if is_summarizer_call(messages):
            return "SUMMARY"
        return "answer " + "with some length " * 10

    config = gateway_config(tmp_path, {**MANUAL_ONLY, "storage": {"url": storage_url}})
    async with open_app(config, scripted_factory(ScriptedChatModel(default=respond))) as (
        c,
        app,
    ):
        thread = (await c.post("/threads", json={})).json()["thread_id"]
        for i in range(4):
            r = await c.post(
                f"/threads/{thread}/runs/wait",
                json={"assistant_id": "agent", "input": user(str(i))},
            )
            assert r.status_code == 200, r.text
        before = (await c.get(f"/threads/{thread}/state")).json()

        storage = app.state.gateway.storage
        renew = storage.renew_thread_lock
        stalls = []

        async def renew_then_stall(thread_id: str, holder: str, ttl_seconds: float) -> bool:
            # The last check before the write passes; then the worker stalls past the TTL.
            renewed: bool = await renew(thread_id, holder, ttl_seconds)
            if not stalls:
                stalls.append(holder)
                await take_over(storage_url, thread_id)
            return renewed

        monkeypatch.setattr(storage, "renew_thread_lock", renew_then_stall)
        r = await c.post(f"/threads/{thread}/compact", json={"force": True})
        assert stalls, "the compaction never re-checked its lease"
        assert r.status_code == 409, r.text
        assert "lease on the thread was lost" in r.json()["detail"]
        after = (await c.get(f"/threads/{thread}/state")).json()
        assert after["checkpoint"] == before["checkpoint"]
        assert after["values"] == before["values"]
        assert (await c.get(f"/threads/{thread}/compactions")).json() == []
        transcript = (await c.get(f"/threads/{thread}/transcript")).json()["entries"]
        assert all(e["kind"] == "message" for e in transcript)


async def test_fencing_tokens_count_up_across_releases(tmp_path: Path) -> None:
    async with open_storage(f"sqlite:///{tmp_path / 'g.db'}") as storage:
        await storage.create_thread("t1")
        first = await storage.acquire_thread_lease("t1", "a", "run", 60)
        assert first is not None
        assert await storage.holds_thread_lock("t1", "a", first.token)
        assert await storage.release_thread_lock("t1", "a")
        assert not await storage.holds_thread_lock("t1", "a", first.token)
        second = await storage.acquire_thread_lease("t1", "b", "run", 60)
        assert second is not None and second.token == first.token + 1
        assert not await storage.holds_thread_lock("t1", "a", first.token)
        assert not await storage.holds_thread_lock("t1", "b", first.token)
        assert await storage.holds_thread_lock("t1", "b", second.token)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_database_from_before_fencing_tokens_still_opens(
    tmp_path: Path, backend: str
) -> None:
    """A database at migration 2 (no token column) with a live lease opens and keeps working."""
    old = [m for m in MIGRATIONS if m.version <= 2]
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
        with sqlite3.connect(tmp_path / "old.db") as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TEXT NOT NULL)"
            )
            for m in old:
                for statement in m.sqlite:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, 'then')", (m.version, m.name)
                )
            conn.execute("INSERT INTO threads VALUES ('t1', 'x', 'x', '{}', 'busy')")
            conn.execute("INSERT INTO thread_locks VALUES ('t1', 'old-run', 'run', 0, 4102444800)")
        cleanup = None
    else:
        url, dsn, schema = postgres_url()
        cleanup = (dsn, schema)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
            conn.execute(
                f'CREATE TABLE "{schema}".schema_migrations (version INTEGER PRIMARY KEY, '  # type: ignore[arg-type]
                "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
            )
            for m in old:
                for statement in m.postgres:
                    conn.execute(statement.replace("{schema}", f'"{schema}"'))  # type: ignore[arg-type]
                conn.execute(
                    f'INSERT INTO "{schema}".schema_migrations (version, name) VALUES (%s, %s)',  # type: ignore[arg-type]
                    (m.version, m.name),
                )
            conn.execute(
                f"INSERT INTO \"{schema}\".threads VALUES ('t1', now(), now(), '{{}}', 'busy')"  # type: ignore[arg-type]
            )
            conn.execute(
                f"INSERT INTO \"{schema}\".thread_locks VALUES ('t1', 'old-run', 'run', now(), "  # type: ignore[arg-type]
                "now() + interval '1 hour')"
            )
    try:
        async with open_storage(url) as storage:
            assert await storage.schema_version() == len(MIGRATIONS)
            lock = await storage.get_thread_lock("t1")
            assert lock is not None and (lock.holder, lock.token) == ("old-run", 0)
            assert await storage.holds_thread_lock("t1", "old-run", 0)
            assert await storage.release_thread_lock("t1", "old-run")
            taken = await storage.acquire_thread_lease("t1", "new-run", "run", 60)
            assert taken is not None and taken.token == 1
    finally:
        if cleanup is not None:
            drop_schema(*cleanup)
