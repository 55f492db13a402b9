"""A run's task writes are held until its step's checkpoint, on SQLite and on PostgreSQL.

Both gateway savers share `HeldWrites`: writes under a lease wait for the thread's next
checkpoint and commit in its transaction; a read of the thread commits them first (so it sees
them), the run's end commits what no checkpoint took along, a lost lease drops them (raising
`LeaseLostError`), a failed or cancelled commit keeps them for the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg import sql

from foldwise.gateway._checkpoint_head import read_head
from foldwise.gateway._checkpointer import open_checkpointer
from foldwise.gateway._errors import LeaseLostError
from foldwise.gateway._held_writes import HeldWrites, flush_writes
from foldwise.gateway._leases import LEASE_KEY, Lease
from foldwise.gateway.storage import open_storage
from tests.test_gateway_lease_fencing import take_over

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


@asynccontextmanager
async def _leased(url: str) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """A saver with thread `t1` leased; the config of a run step on its head."""
    async with open_storage(url) as storage, open_checkpointer(url) as saver:
        await storage.create_thread("t1")
        taken = await storage.acquire_thread_lease("t1", "run-1", "run", 60)
        assert taken is not None
        lease = Lease("t1", "run-1", taken.token, storage)
        head = await saver.aput(CONFIG, empty_checkpoint(), {}, {})
        yield saver, {"configurable": {**head["configurable"], LEASE_KEY: lease}}


async def _stored(saver: Any) -> list[tuple[str, str]]:
    """The thread's task writes in the database (read behind the saver's back)."""
    query = "SELECT task_id, channel FROM {} WHERE thread_id = 't1' ORDER BY task_id, idx"
    if hasattr(saver, "loop_conn"):
        return [tuple(r) for r in saver.loop_conn.fetchall(query.format("writes"))]
    async with saver.conn.connection() as conn, conn.cursor() as cursor:
        await cursor.execute(query.format("checkpoint_writes"))
        return [(r["task_id"], r["channel"]) for r in await cursor.fetchall()]


async def test_held_writes_commit_with_the_checkpoint(storage_url: str) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        assert await _stored(saver) == []  # held
        await saver.aput(config, empty_checkpoint(), {}, {})
        assert await _stored(saver) == [("task-a", "messages")]
        await flush_writes(saver, "t1")  # nothing left to flush
        assert await _stored(saver) == [("task-a", "messages")]


async def test_the_runs_end_commits_what_no_checkpoint_took_along(storage_url: str) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("__interrupt__", ["ok?"])], "task-a")
        assert await _stored(saver) == []
        await flush_writes(saver, "t1")  # `flush_run_writes`, before any read of the thread
        assert await _stored(saver) == [("task-a", "__interrupt__")]


async def test_reads_of_the_thread_see_its_held_writes(storage_url: str) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("__interrupt__", ["ok?"])], "task-a")
        head = await read_head(saver, "t1")
        assert head is not None and head.interrupts == {"task-a": ["ok?"]}
        await saver.aput_writes(config, [("messages", "more")], "task-b")
        saved = await saver.aget_tuple(CONFIG)
        assert saved is not None
        assert [w[:2] for w in saved.pending_writes or ()] == [
            ("task-a", "__interrupt__"),
            ("task-b", "messages"),
        ]
        await saver.aput_writes(config, [("messages", "last")], "task-c")
        listed = [c async for c in saver.alist(None, limit=1)]  # every thread's held writes
        assert ("task-c", "messages", "last") in (listed[0].pending_writes or [])


async def test_a_lost_lease_drops_the_held_writes_and_raises(storage_url: str) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("__error__", "boom")], "task-a")
        await take_over(storage_url, "t1")
        with pytest.raises(LeaseLostError):
            await flush_writes(saver, "t1")  # the run's end
        await flush_writes(saver, "t1")  # dropped: nothing left to try again
        await saver.aput_writes(config, [("messages", "late")], "task-b")
        with pytest.raises(LeaseLostError):
            await saver.aput(config, empty_checkpoint(), {}, {})
        assert await saver.aget_tuple(CONFIG) is not None  # the read settles: nothing held
        assert await _stored(saver) == []
        assert [c.checkpoint["id"] async for c in saver.alist(CONFIG)] == [
            config["configurable"]["checkpoint_id"]
        ]


async def test_deleting_the_thread_drops_its_held_writes(storage_url: str) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        await saver.adelete_thread("t1")
        await flush_writes(saver, "t1")
        assert await _stored(saver) == []
        assert await saver.aget_tuple(CONFIG) is None


@pytest.mark.postgres
@pytest.mark.parametrize("storage_url", ["postgres"], indirect=True)  # SQLite: test_review16_*
async def test_a_failed_checkpoint_commit_keeps_the_steps_task_writes_on_postgres(
    storage_url: str,
) -> None:
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        # `jsonb` refuses a NUL character: the checkpoint's insert fails in the transaction
        # that already holds the step's task writes.
        bad = empty_checkpoint()
        bad["channel_values"] = {"note": "a\x00b"}
        with pytest.raises(psycopg.Error, match="unsupported Unicode escape"):
            await saver.aput(config, bad, {}, {})
        assert await _stored(saver) == []  # rolled back with the checkpoint
        await flush_writes(saver, "t1")  # the run's end
        assert await _stored(saver) == [("task-a", "messages")]


@pytest.mark.postgres
@pytest.mark.parametrize("storage_url", ["postgres"], indirect=True)  # SQLite: test_review16_*
async def test_a_cancelled_checkpoint_commit_keeps_the_steps_task_writes_on_postgres(
    storage_url: str,
) -> None:
    dsn, schema = storage_url.split("?schema=")
    async with _leased(storage_url) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        async with await psycopg.AsyncConnection.connect(dsn) as blocker:
            # A takeover's update in flight: the lease check (FOR SHARE) waits for it.
            await blocker.execute(
                sql.SQL("SELECT 1 FROM {}.thread_locks WHERE thread_id = 't1' FOR UPDATE").format(
                    sql.Identifier(schema)
                )
            )
            put = asyncio.create_task(saver.aput(config, empty_checkpoint(), {}, {}))
            await asyncio.sleep(0.3)
            assert not put.done()
            put.cancel()
            with pytest.raises(asyncio.CancelledError):
                await put
            await blocker.rollback()
        await flush_writes(saver, "t1")
        assert await _stored(saver) == [("task-a", "messages")]


async def test_a_lost_lease_drops_only_its_own_batch() -> None:
    """Writes held under a later lease stay held when an earlier lease's batch is refused."""
    committed: list[tuple[str, list[str]]] = []
    old, new = Lease("t1", "old", 1, None), Lease("t1", "new", 2, None)  # type: ignore[arg-type]

    async def commit(lease: Lease, payloads: list[str]) -> None:
        if lease == old:
            raise LeaseLostError("t1")
        committed.append((lease.holder, payloads))

    held: HeldWrites[str] = HeldWrites(commit)
    held.hold("t1", old, "stale")
    held.hold("t1", new, "fresh")
    with pytest.raises(LeaseLostError):
        await held.flush("t1")
    assert held.threads() == ["t1"] and committed == []
    await held.settle("t1")
    assert committed == [("new", ["fresh"])] and held.threads() == []
    # A checkpoint under `new` takes its own writes while no other lease's are held...
    held.hold("t1", new, "step")
    assert await held.take("t1", new) == [(new, "step")]
    # ...else every held write is committed first, each lease's on its own.
    held.hold("t1", old, "stale again")
    held.hold("t1", new, "step 2")
    assert await held.take("t1", new) == []
    assert committed[-1] == ("new", ["step 2"]) and held.threads() == []


async def test_a_flush_returns_only_once_an_earlier_flushs_writes_are_committed() -> None:
    """A run's end (second flush) must not pass a read's flush still committing its writes."""
    lease = Lease("t1", "run", 1, None)  # type: ignore[arg-type]
    release = asyncio.Event()
    committed: list[list[str]] = []

    async def commit(_lease: Lease, payloads: list[str]) -> None:
        await release.wait()
        committed.append(payloads)

    held: HeldWrites[str] = HeldWrites(commit)
    held.hold("t1", lease, "interrupt")
    reading = asyncio.create_task(held.settle("t1"))  # a read's settle: pops, then commits
    await asyncio.sleep(0)
    ending = asyncio.create_task(flush_writes(type("Saver", (), {"held_writes": held})(), "t1"))
    await asyncio.sleep(0.05)
    assert not ending.done()  # waits for the read's commit instead of finding nothing
    release.set()
    await asyncio.gather(reading, ending)
    assert committed == [["interrupt"]]
