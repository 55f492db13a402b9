"""Connection plumbing of the SQLite backend: pragmas, migrations, transactions."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from foldwise.errors import ThreadNotFoundError
from foldwise.gateway.storage._base import StorageBase, wrap_errors
from foldwise.gateway.storage._codec import json_contains, utcnow
from foldwise.gateway.storage._errors import GatewayStorageError
from foldwise.gateway.storage._migrations import check_not_newer, pending_migrations

__all__ = ["DB_ERRORS", "SqliteBase", "from_epoch", "from_text", "to_text"]

logger = logging.getLogger(__name__)

DB_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
_MEMORY = ":memory:"


def to_text(moment: datetime) -> str:
    """Store a datetime as fixed-width UTC ISO text, which sorts chronologically."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_text(value: Any) -> datetime:
    """Read a datetime stored by `to_text`."""
    return datetime.fromisoformat(value).astimezone(UTC)


def from_epoch(value: Any) -> datetime:
    """Read a lease time stored as epoch seconds."""
    return datetime.fromtimestamp(float(value), UTC)


class SqliteBase(StorageBase):
    """Connection, pragmas, migrations and transaction helpers (see `SqliteGatewayStorage`)."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be 'FULL' or 'NORMAL'")
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise ValueError("busy_timeout_ms must be an integer")
        self._path = os.fspath(path)
        self._busy_timeout_ms = max(0, busy_timeout_ms)
        self._synchronous = synchronous
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> str:
        """The database file path, or ``":memory:"``."""
        return self._path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path!r})"

    # lifecycle -------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Open the connection (once) and apply pending migrations."""
        async with self._lock:
            if self._conn is None:
                self._conn = await self._connect()
            await self._migrate(self._conn)

    async def _connect(self) -> aiosqlite.Connection:
        with wrap_errors("setup", None, DB_ERRORS):
            if self._path != _MEMORY:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            conn = await aiosqlite.connect(self._path, isolation_level=None)
            try:
                await conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
                if self._path != _MEMORY:
                    await self._enable_wal(conn)
                await conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                await conn.execute("PRAGMA foreign_keys = ON")
                await conn.create_function(
                    "foldwise_json_contains", 2, json_contains, deterministic=True
                )
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _enable_wal(self, conn: aiosqlite.Connection) -> None:
        # Switching a fresh file to WAL needs an exclusive lock and SQLite answers SQLITE_BUSY
        # at once (without the busy handler) while another connection is setting up, so retry
        # until the busy timeout. The mode is persistent: later opens find it already set.
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
                    row = await cursor.fetchone()
                break
            except sqlite3.OperationalError as exc:
                code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
                if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
        if row is None or str(row[0]).lower() != "wal":
            logger.warning("SQLite %s did not switch to WAL (journal mode %s)", self._path, row)

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        with wrap_errors("setup", None, DB_ERRORS):
            await conn.execute("BEGIN IMMEDIATE")
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
                )
                async with conn.execute("SELECT version FROM schema_migrations") as cursor:
                    applied = [int(r[0]) for r in await cursor.fetchall()]
                problem = check_not_newer(applied)
                if problem:
                    raise GatewayStorageError(problem, operation="setup")
                for migration in pending_migrations(applied):
                    for statement in migration.sqlite:
                        await conn.execute(statement)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at) "
                        "VALUES (?, ?, ?)",
                        (migration.version, migration.name, to_text(utcnow())),
                    )
                    logger.info(
                        "applied SQLite migration %d (%s) to %s",
                        migration.version,
                        migration.name,
                        self._path,
                    )
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")

    async def aclose(self) -> None:
        """Close the connection; safe to call twice."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with wrap_errors("aclose", None, DB_ERRORS):
                    await conn.close()

    def _connection(self, operation: str, thread_id: str | None) -> aiosqlite.Connection:
        if self._conn is None:
            raise GatewayStorageError(
                "storage is not open; await setup() (or use `async with`) first",
                operation=operation,
                thread_id=thread_id,
            )
        return self._conn

    @asynccontextmanager
    async def _read(
        self, operation: str, thread_id: str | None
    ) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            conn = self._connection(operation, thread_id)
            with wrap_errors(operation, thread_id, DB_ERRORS):
                yield conn

    @asynccontextmanager
    async def _write(
        self, operation: str, thread_id: str | None
    ) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            conn = self._connection(operation, thread_id)
            with wrap_errors(operation, thread_id, DB_ERRORS):
                await conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    await conn.execute("COMMIT")
                except BaseException:
                    await self._rollback(conn, operation, thread_id)
                    raise

    @staticmethod
    async def _rollback(conn: aiosqlite.Connection, operation: str, thread_id: str | None) -> None:
        try:
            if conn.in_transaction:
                await conn.execute("ROLLBACK")
        except sqlite3.Error:
            logger.exception("rollback after a failed %s on thread %s failed", operation, thread_id)

    @staticmethod
    async def _fetchone(
        conn: aiosqlite.Connection, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> Any:
        async with conn.execute(query, params) as cursor:
            return await cursor.fetchone()

    @staticmethod
    async def _fetchall(
        conn: aiosqlite.Connection, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[Any]:
        async with conn.execute(query, params) as cursor:
            return list(await cursor.fetchall())

    async def _require_thread(self, conn: aiosqlite.Connection, thread_id: str) -> None:
        if (
            await self._fetchone(conn, "SELECT 1 FROM threads WHERE thread_id = ?", (thread_id,))
            is None
        ):
            raise ThreadNotFoundError(thread_id)

    async def ping(self) -> None:
        """Run ``SELECT 1``."""
        async with self._read("ping", None) as conn:
            await self._fetchone(conn, "SELECT 1")

    async def schema_version(self) -> int:
        """Return the highest applied migration number."""
        async with self._read("schema_version", None) as conn:
            row = await self._fetchone(conn, "SELECT MAX(version) FROM schema_migrations")
        return int(row[0] or 0)
