"""SQLite dialect of `SqlGatewayStorage`, and `SqliteGatewayStorage`.

One connection per instance (`LoopConnection`: statements inline on the event loop, the
waits for the writer lock and the commit in its worker thread), serialized by an
`asyncio.Lock`. Every write runs in
``BEGIN IMMEDIATE``, which takes SQLite's single writer lock up front: concurrent writers in
other connections or processes wait (up to `busy_timeout_ms`) instead of failing half-way, and
the per-thread transcript `seq` is assigned under that lock. WAL journal, foreign keys on,
``synchronous=FULL`` by default (a committed transaction survives power loss, not only a
process crash). Row times are fixed-width UTC ISO text; lease times are epoch seconds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from foldwise._sqlite_busy import busy_delays, is_busy
from foldwise.gateway.storage._base import wrap_errors
from foldwise.gateway.storage._codec import json_contains
from foldwise.gateway.storage._dialect import Dialect, Row, not_open
from foldwise.gateway.storage._migrations import Migration
from foldwise.gateway.storage._sql import SqlGatewayStorage
from foldwise.gateway.storage._sqlite_conn import LoopConnection

__all__ = ["SqliteDialect", "SqliteGatewayStorage", "rollback"]

logger = logging.getLogger(__name__)

_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
_MEMORY = ":memory:"


class _Session:
    """`Session` over the connection, inline on the event loop (placeholders already ``?``)."""

    def __init__(self, conn: LoopConnection) -> None:
        self._conn = conn

    async def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        return self._conn.fetchone(query, params)

    async def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(self._conn.fetchall(query, params))

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(query, params)

    async def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(query, rows)


async def rollback(conn: aiosqlite.Connection, operation: str, thread_id: str | None) -> None:
    """Roll back whatever transaction a failed or cancelled write left open (aiosqlite).

    Always sent, never judged by `in_transaction`: a write cancelled while its ``BEGIN`` was
    queued still runs that ``BEGIN`` later, and aiosqlite runs requests in order, so only an
    unconditional ``ROLLBACK`` queued behind it keeps the connection usable.
    """
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            logger.exception("rollback after a failed %s on thread %s failed", operation, thread_id)
    except sqlite3.Error:
        logger.exception("rollback after a failed %s on thread %s failed", operation, thread_id)


async def _rollback(conn: LoopConnection, operation: str, thread_id: str | None) -> None:
    """Roll back what a failed or cancelled write left open; log (never raise) a failure."""
    try:
        await conn.rollback()
    except sqlite3.Error:
        logger.exception("rollback after a failed %s on thread %s failed", operation, thread_id)


_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _json_path(path: Sequence[str | int]) -> str:
    parts = ["$"]
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step:d}]")
        elif _PATH_KEY.fullmatch(step):
            parts.append(f".{step}")
        else:  # pragma: no cover - paths are constants of this package
            raise ValueError(f"unsupported JSON path key {step!r}")
    return "".join(parts)


def _lower(value: Any) -> str | None:
    """Unicode case folding for substring filters (SQLite's LOWER folds ASCII only)."""
    return None if value is None else str(value).lower()


class SqliteDialect(Dialect):
    """SQLite: one `LoopConnection`, ``BEGIN IMMEDIATE`` writes, epoch-second leases."""

    backend = "sqlite"
    json_param = "?"
    now = "((julianday('now') - 2440587.5) * 86400.0)"
    later = "((julianday('now') - 2440587.5) * 86400.0 + ?)"
    lower = "foldwise_lower"
    json_string = "text"

    def __init__(self, path: str, *, busy_timeout_ms: int, synchronous: str) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous
        self._conn: LoopConnection | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return repr(self.path)

    # connection ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the connection once, with the pragmas and the JSON containment function."""
        async with self._lock:
            if self._conn is not None:
                return
            with wrap_errors("setup", None, _ERRORS):
                if self.path != _MEMORY:
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                conn = LoopConnection(self.path)
                await conn.open()
                try:
                    conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
                    if self.path != _MEMORY:
                        await self._enable_wal(conn)
                    conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                    conn.execute("PRAGMA foreign_keys = ON")
                    conn.conn.create_function(
                        "foldwise_json_contains", 2, json_contains, deterministic=True
                    )
                    conn.conn.create_function("foldwise_lower", 1, _lower, deterministic=True)
                except BaseException:
                    await conn.close()
                    raise
            self._conn = conn

    async def _enable_wal(self, conn: LoopConnection) -> None:
        # Switching a fresh file to WAL needs an exclusive lock and SQLite answers SQLITE_BUSY
        # at once (without the busy handler) while another connection is setting up, so retry
        # until the busy timeout. The mode is persistent: later opens find it already set.
        delays = busy_delays(self._busy_timeout_ms)
        while True:
            try:
                row = await conn.run(conn.fetchone, "PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                delay = next(delays, None) if is_busy(exc) else None
                if delay is None:
                    raise
                await asyncio.sleep(delay)
        if row is None or str(row[0]).lower() != "wal":
            logger.warning("SQLite %s did not switch to WAL (journal mode %s)", self.path, row)

    async def close(self) -> None:
        """Close the connection; safe to call twice."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with wrap_errors("aclose", None, _ERRORS):
                    await conn.close()

    @asynccontextmanager
    async def read(self, operation: str, thread_id: str | None) -> AsyncIterator[_Session]:
        """The connection, outside a transaction (or this task's `batch`)."""
        joined = self.joined()
        if joined is not None:
            yield joined  # type: ignore[misc]
            return
        async with self._lock:
            if self._conn is None:
                raise not_open(operation, thread_id)
            with wrap_errors(operation, thread_id, _ERRORS):
                yield _Session(self._conn)

    @asynccontextmanager
    async def write(self, operation: str, thread_id: str | None) -> AsyncIterator[_Session]:
        """The connection inside ``BEGIN IMMEDIATE`` (the database's one writer lock).

        Waiting for the lock and the commit's sync run in the connection's worker thread;
        the statements in between run inline (`LoopConnection`). Inside this task's `batch`,
        its transaction.
        """
        joined = self.joined()
        if joined is not None:
            yield joined  # type: ignore[misc]
            return
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise not_open(operation, thread_id)
            with wrap_errors(operation, thread_id, _ERRORS):
                try:
                    await conn.begin_immediate()
                    yield _Session(conn)
                    await conn.commit()
                except BaseException:
                    await _rollback(conn, operation, thread_id)
                    raise

    # values ----------------------------------------------------------------------------------

    def to_time(self, moment: datetime) -> str:
        """Fixed-width UTC ISO text, which sorts chronologically."""
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    def from_time(self, value: Any) -> datetime:
        """Read a time stored by `to_time`."""
        return datetime.fromisoformat(value).astimezone(UTC)

    def from_lease_time(self, value: Any) -> datetime:
        """Read a lease time stored as epoch seconds."""
        return datetime.fromtimestamp(float(value), UTC)

    def json_contains(self, column: str) -> str:
        """Postgres ``@>`` semantics through the registered Python function."""
        return f"foldwise_json_contains({column}, ?)"

    def json_text(self, column: str, *path: str | int) -> str:
        """``json_extract`` with a ``$.key[0]`` path."""
        return f"json_extract({column}, '{_json_path(path)}')"

    def json_type(self, column: str, *path: str | int) -> str:
        """``json_type`` (`text` for strings, `array`, `object`, `integer`...)."""
        return f"json_type({column}, '{_json_path(path)}')"

    def json_values(self, column: str) -> str:
        """``json_each`` of the object."""
        return f"json_each({column})"

    # migrations ------------------------------------------------------------------------------

    def setup_statements(self) -> Sequence[tuple[str, Sequence[Any]]]:
        """Create the migration ledger (``BEGIN IMMEDIATE`` already serializes setups)."""
        return [
            (
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
                (),
            )
        ]

    def migration_statements(self, migration: Migration) -> Sequence[str]:
        """The migration's SQLite statements."""
        return migration.sqlite


class SqliteGatewayStorage(SqlGatewayStorage):
    """Gateway tables in one SQLite file (or in memory).

    Several instances (or processes) may open the same file; writes serialize on SQLite's
    writer lock and thread leases exclude each other. Do not put the file on a network
    filesystem (WAL needs shared memory).

    Args:
        path: The database file (parent directories are created), or ``":memory:"``.
        busy_timeout_ms: How long a writer waits for another connection's write lock.
        synchronous: ``"FULL"`` (durable across power loss) or ``"NORMAL"`` (durable across
            application crashes only, faster).
    """

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
        self._sqlite = SqliteDialect(
            os.fspath(path), busy_timeout_ms=max(0, busy_timeout_ms), synchronous=synchronous
        )
        super().__init__(self._sqlite)  # the dialect's path is the storage's `path`

    @property
    def path(self) -> str:
        """The database file path, or ``":memory:"``."""
        return self._sqlite.path

    @property
    def connection(self) -> LoopConnection | None:
        """The open connection (`None` before `setup`): for diagnostics, e.g. a trace hook."""
        return self._sqlite._conn
