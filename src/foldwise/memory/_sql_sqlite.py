"""The SQLite dialect of `SqlMemoryBackend`: one `sqlite3` connection, ``BEGIN IMMEDIATE``.

The memory tables live in the gateway's database file (``storage.url``), next to the tables
that `aiosqlite` writes: WAL journal (readers never block the writer), ``busy_timeout`` so a
write waits for the other connection's or process's writer lock instead of failing, and every
write in ``BEGIN IMMEDIATE``, which takes that lock up front (no deadlock upgrading a read).
The connection is shared by the sync calls and by the worker threads of the async twins, so
a `threading.Lock` serializes its use.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from foldwise._sqlite_busy import busy_delays, is_busy
from foldwise.errors import StorageError
from foldwise.memory._sql_dialect import MIGRATIONS, Row, SqliteSearch, database_errors

__all__ = ["SqliteDialect"]

_MEMORY = ":memory:"
_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)


class _Session:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._conn.execute(query, params).fetchone()
        return None if row is None else tuple(row)

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        return [tuple(row) for row in self._conn.execute(query, params).fetchall()]

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(query, params)


class SqliteDialect(SqliteSearch):
    """SQLite file (or ``:memory:``) with WAL, a busy timeout and immediate write transactions.

    Args:
        path: The database file (parent directories are created), or ``":memory:"``.
        busy_timeout_ms: How long a write waits for another connection's writer lock.
    """

    name = "sqlite"

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteDialect({self.path!r})"

    def open(self) -> None:
        """Open the connection once, set the pragmas, apply pending migrations."""
        with self._lock, database_errors(_ERRORS, "setup"):
            if self._conn is not None:
                return
            if self.path != _MEMORY:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms):d}")
                if self.path != _MEMORY:
                    self._enable_wal(conn)
                conn.execute("PRAGMA synchronous = FULL")
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a fresh file to WAL answers SQLITE_BUSY at once (no busy handler) while
        # another connection sets up, so retry until the busy timeout; the mode persists.
        delays = busy_delays(self._busy_timeout_ms)
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                delay = next(delays, None) if is_busy(exc) else None
                if delay is None:
                    raise
                time.sleep(delay)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS memory_schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM memory_schema_migrations")}
            for version, name, statements in MIGRATIONS["sqlite"]:
                if version in done:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO memory_schema_migrations (version, name, applied_at) "
                    "VALUES (?, ?, ?)",
                    (version, name, self.to_time(datetime.now(UTC))),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("memory backend is not open; call setup() (or asetup()) first")
        return self._conn

    @contextmanager
    def read(self) -> Iterator[_Session]:
        """The connection, outside a transaction."""
        with self._lock, database_errors(_ERRORS, "read"):
            yield _Session(self._connection())

    @contextmanager
    def write(self) -> Iterator[_Session]:
        """The connection inside ``BEGIN IMMEDIATE`` (the database's one writer lock)."""
        with self._lock, database_errors(_ERRORS, "write"):
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield _Session(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def to_time(self, moment: datetime) -> str:
        """Fixed-width UTC ISO text, which sorts chronologically."""
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    def from_time(self, value: Any) -> datetime:
        """The ISO text `to_time` wrote, as an aware datetime."""
        return datetime.fromisoformat(str(value))
