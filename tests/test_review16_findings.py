"""Review of issue 16 (branch perf): the SQLite saver on the event loop, held task writes.

- A step's task writes are held until its checkpoint commits. When that commit fails (the
  disk is full, the writer lock timed out, the run is cancelled mid-commit) they must stay
  held, so the run's end (`aflush`) still commits them as LangGraph's own saver would have:
  the step's finished tasks do not run again on resume.
- Checkpoint reads (one blob can be megabytes) run in the connection's worker thread, not
  inline on the event loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from foldwise.gateway._checkpointer import open_checkpointer
from foldwise.gateway._checkpointer_sqlite import FencedSqliteSaver
from foldwise.gateway._leases import LEASE_KEY, Lease
from foldwise.gateway.storage import open_storage


@asynccontextmanager
async def _leased(tmp_path: Path) -> AsyncIterator[tuple[FencedSqliteSaver, dict[str, Any]]]:
    """A saver on a file with thread `t1` leased; the config of a run step on its head."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    async with open_storage(url) as storage, open_checkpointer(url) as saver:
        assert isinstance(saver, FencedSqliteSaver)
        await storage.create_thread("t1")
        taken = await storage.acquire_thread_lease("t1", "run-1", "run", 60)
        assert taken is not None
        lease = Lease("t1", "run-1", taken.token, storage)
        head = await saver.aput(
            {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
        )
        config = {"configurable": {**head["configurable"], LEASE_KEY: lease}}
        yield saver, config


def _stored_writes(saver: FencedSqliteSaver) -> list[tuple[Any, ...]]:
    return saver.loop_conn.fetchall("SELECT task_id, channel FROM writes WHERE thread_id = 't1'")


def _fail_next_commit(saver: FencedSqliteSaver) -> None:
    real = saver.loop_conn.commit

    async def commit() -> None:
        saver.loop_conn.commit = real  # type: ignore[method-assign]
        raise sqlite3.OperationalError("database or disk is full")

    saver.loop_conn.commit = commit  # type: ignore[method-assign]


async def test_a_failed_checkpoint_commit_keeps_the_steps_task_writes(tmp_path: Path) -> None:
    async with _leased(tmp_path) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        _fail_next_commit(saver)
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            await saver.aput(config, empty_checkpoint(), {}, {})
        assert _stored_writes(saver) == []  # rolled back with the checkpoint
        await saver.held_writes.flush("t1")  # the run's end
        assert _stored_writes(saver) == [("task-a", "messages")]


async def test_a_failed_flush_keeps_the_writes_for_the_next_one(tmp_path: Path) -> None:
    async with _leased(tmp_path) as (saver, config):
        await saver.aput_writes(config, [("__error__", "boom")], "task-a")
        _fail_next_commit(saver)
        with pytest.raises(sqlite3.OperationalError):
            await saver.held_writes.flush("t1")
        await saver.held_writes.flush("t1")
        assert _stored_writes(saver) == [("task-a", "__error__")]


async def test_a_checkpoint_commit_cancelled_keeps_the_steps_task_writes(tmp_path: Path) -> None:
    async with _leased(tmp_path) as (saver, config):
        await saver.aput_writes(config, [("messages", "done")], "task-a")
        real = saver.loop_conn.commit
        started = asyncio.Event()

        async def slow_commit() -> None:
            started.set()
            await asyncio.sleep(10)

        saver.loop_conn.commit = slow_commit  # type: ignore[method-assign]
        put = asyncio.create_task(saver.aput(config, empty_checkpoint(), {}, {}))
        await started.wait()
        put.cancel()
        with pytest.raises(asyncio.CancelledError):
            await put
        saver.loop_conn.commit = real  # type: ignore[method-assign]
        await saver.held_writes.flush("t1")
        assert _stored_writes(saver) == [("task-a", "messages")]


async def test_checkpoint_reads_run_in_the_worker_thread(tmp_path: Path) -> None:
    async with _leased(tmp_path) as (saver, config):
        threads: list[str] = []
        real = saver.conn

        class Spy:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def cursor(self) -> Any:
                threads.append(threading.current_thread().name)
                return real.cursor()

            def execute(self, *args: Any) -> Any:
                threads.append(threading.current_thread().name)
                return real.execute(*args)

        saver.conn = Spy()  # type: ignore[assignment]
        assert await saver.aget_tuple(config) is not None
        assert [c async for c in saver.alist(config, limit=1)]
        assert threads
        assert all(name.startswith("foldwise-sqlite") for name in threads), threads
