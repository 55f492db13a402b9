"""Open the LangGraph store behind the gateway's store API, on the gateway database.

- ``sqlite:///path``: `AsyncSqliteStore` on its own aiosqlite connection to the same file as
  the gateway tables and the checkpoints (its tables are ``store`` and ``store_migrations``).
- ``memory://``: `AsyncSqliteStore` on a private in-memory database (single process, tests).
- ``postgresql://...``: `AsyncPostgresStore` on a small connection pool, in the ``?schema=``
  of the gateway tables when one is given.

Several workers may start at once. On PostgreSQL their `setup()` calls serialize on an advisory
lock; on SQLite, whose store migrations are not atomic (an ``ALTER TABLE`` and its ledger row
commit separately), a setup that loses the race to another worker is retried.

Item TTLs (``ttl`` on a put, in minutes) are honoured: the store refreshes them on reads and a
sweeper task deletes expired items every `SWEEP_MINUTES`; an expired item stays readable until
the next sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import aiosqlite
from langgraph.store.base import BaseStore, TTLConfig
from langgraph.store.sqlite.aio import AsyncSqliteStore

from foldwise.gateway._checkpointer import postgres_pool, setup_serialized, sqlite_path

if TYPE_CHECKING:
    from langgraph.store.postgres.aio import AsyncPostgresStore

__all__ = ["SWEEP_MINUTES", "open_store"]

logger = logging.getLogger(__name__)

SWEEP_MINUTES = 1
"""How often expired store items are deleted."""

_TTL: TTLConfig = {"refresh_on_read": True, "sweep_interval_minutes": SWEEP_MINUTES}
_BUSY_TIMEOUT_MS = 5000
_SETUP_ATTEMPTS = 8


@asynccontextmanager
async def _running(store: AsyncSqliteStore | AsyncPostgresStore) -> AsyncIterator[None]:
    """The store's TTL sweeper while open; on exit it and the store's batching task stop."""
    await store.start_ttl_sweeper()
    try:
        yield
    finally:
        await store.stop_ttl_sweeper(timeout=5)
        # LangGraph's async stores batch operations in a task they only cancel when garbage
        # collected; end it here so no task outlives the lifespan.
        batcher: asyncio.Task[None] | None = getattr(store, "_task", None)
        if batcher is not None and not batcher.done():
            batcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await batcher


async def _setup_sqlite(store: AsyncSqliteStore) -> None:
    for attempt in range(1, _SETUP_ATTEMPTS + 1):
        try:
            await store.setup()
            return
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as error:
            # Another worker is migrating the same file: its next step is already done here
            # ("duplicate column") or its ledger row is in ("UNIQUE constraint"). Read again.
            if attempt == _SETUP_ATTEMPTS:
                raise
            logger.info("store setup raced another worker (%s); retrying", error)
            store.is_setup = False
            await asyncio.sleep(0.1 * attempt)


@asynccontextmanager
async def _sqlite_store(url: str) -> AsyncIterator[BaseStore]:
    conn = await aiosqlite.connect(sqlite_path(url), isolation_level=None)
    try:
        await conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        store = AsyncSqliteStore(conn, ttl=_TTL)
        await _setup_sqlite(store)
        async with _running(store):
            yield store
    finally:
        await conn.close()


@asynccontextmanager
async def _postgres_store(url: str) -> AsyncIterator[BaseStore]:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with postgres_pool(url, max_size=5) as pool:
        store = AsyncPostgresStore(pool, ttl=_TTL)
        await setup_serialized(url, "store", store.setup)
        async with _running(store):
            yield store


@asynccontextmanager
async def open_store(url: str) -> AsyncIterator[BaseStore]:
    """Open (and set up) the LangGraph store for a storage URL, with its TTL sweeper.

    Args:
        url: `storage.url`: ``sqlite:///path``, ``memory://`` or ``postgresql://...``.

    Yields:
        An `AsyncSqliteStore` or `AsyncPostgresStore`.

    Raises:
        ValueError: An unsupported URL.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("sqlite", "memory"):
        opener = _sqlite_store
    elif scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        opener = _postgres_store
    else:
        raise ValueError(f"unsupported storage URL scheme {scheme!r}")
    async with opener(url) as store:
        yield store
