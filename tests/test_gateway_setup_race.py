"""Several workers starting together on a fresh database: every set-up succeeds, none waits.

LangGraph's Postgres migrations build indexes ``CONCURRENTLY``, which waits for every open
snapshot, so a worker blocked in ``pg_advisory_lock`` would deadlock the one migrating; SQLite's
store migrations are not atomic, so a worker can lose a race to another's ``ALTER TABLE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

from foldwise.gateway._checkpointer import open_checkpointer, sqlite_path
from foldwise.gateway._langgraph_store import open_store

WORKERS = 4


async def test_workers_starting_together_share_one_store(storage_url: str) -> None:
    """Concurrent set-ups on a fresh database (several workers) all succeed and agree."""
    async with contextlib.AsyncExitStack() as stack:
        opened = [stack.enter_async_context(open_store(storage_url)) for _ in range(WORKERS)]
        stores = await asyncio.wait_for(asyncio.gather(*opened), timeout=60)
        await stores[0].aput(("foldwise_tenant:w", "ns"), "k", {"v": 1})
        for store in stores[1:]:
            item = await store.aget(("foldwise_tenant:w", "ns"), "k")
            assert item is not None and item.value == {"v": 1}


async def test_workers_starting_together_share_one_checkpointer(storage_url: str) -> None:
    if storage_url.startswith("sqlite"):
        # The gateway storage's set-up, which runs first, leaves the file in WAL mode; the
        # checkpointer's own switch to WAL cannot wait for a busy file.
        with contextlib.closing(sqlite3.connect(sqlite_path(storage_url))) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    async with contextlib.AsyncExitStack() as stack:
        opened = [stack.enter_async_context(open_checkpointer(storage_url)) for _ in range(WORKERS)]
        savers = await asyncio.wait_for(asyncio.gather(*opened), timeout=60)
        for saver in savers:
            assert await saver.aget_tuple({"configurable": {"thread_id": "none"}}) is None
