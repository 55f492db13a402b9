"""`LoopConnection`: a sqlite3 connection used from the event loop, its waits in one thread.

aiosqlite runs every call (execute, fetchone, closing a cursor) in its worker thread: one
round trip between threads per call, about a hundred per `runs/wait` (issue 16 measured them
as the largest share of the gateway's CPU per request). Most statements take microseconds;
what can take long is waiting: for SQLite's writer lock (``BEGIN IMMEDIATE`` under another
connection's write, up to the busy timeout) and for the disk (``COMMIT`` syncs the WAL with
``synchronous=FULL``). So here statements run inline on the event loop and only those two
waits go to the connection's one worker thread: a write transaction costs one round trip
(its commit) when the writer lock is free, two when it must wait for it; a read none.

The connection is opened with ``check_same_thread=False``; it is never used by two threads
at once because its owner (`SqliteDialect`) holds an `asyncio.Lock` around each use, and a
call handed to the worker is always waited for, even when the waiting task is cancelled
(`run`), before anything else touches the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from foldwise._sqlite_busy import is_busy

__all__ = ["LoopConnection"]

T = TypeVar("T")


async def _settled(future: asyncio.Future[Any]) -> None:
    """Wait until `future` is done, whatever cancellations arrive meanwhile."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([future])


class LoopConnection:
    """A sqlite3 connection (autocommit mode) with a single worker thread for its waits.

    Args:
        path: The database file, or ``":memory:"``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="foldwise-sqlite")
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        """The open sqlite3 connection."""
        if self._conn is None:
            raise sqlite3.ProgrammingError("the connection is closed")
        return self._conn

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Call `fn(*args)` in the worker thread; a cancelled caller still waits for it.

        `fn` runs in a copy of the caller's context, as with `asyncio.to_thread` (the
        checkpoint serializer reads a context variable: `keeping_decodes`).
        """
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        future = loop.run_in_executor(self._executor, context.run, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # The worker still runs `fn` on the connection: nobody may use it before it ends.
            await _settled(future)
            raise

    async def open(self) -> None:
        """Connect (in the worker thread: opening may wait on the file)."""
        self._conn = await self.run(
            lambda: sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        )

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        conn, self._conn = self._conn, None
        try:
            if conn is not None:
                await self.run(conn.close)
        finally:
            self._executor.shutdown(wait=False)

    # inline statements ----------------------------------------------------------------------

    def fetchone(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run `query`; its first row."""
        cursor = self.conn.execute(query, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else tuple(row)

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run `query`; all its rows."""
        cursor = self.conn.execute(query, params)
        try:
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run `query`; the number of rows it changed."""
        cursor = self.conn.execute(query, params)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `query` once per row."""
        self.conn.executemany(query, rows).close()

    # waits, in the worker thread ------------------------------------------------------------

    async def begin_immediate(self) -> None:
        """``BEGIN IMMEDIATE``: take the database's writer lock.

        Tried inline first without waiting (the lock is free but for contention); when
        another connection holds it, the wait (up to the busy timeout) is in the worker thread.
        """
        if not self._try_begin():
            await self.run(self.execute, "BEGIN IMMEDIATE")

    def _try_begin(self) -> bool:
        """``BEGIN IMMEDIATE`` with the busy timeout set to 0; False when the lock is held."""
        conn = self.conn
        row = conn.execute("PRAGMA busy_timeout").fetchone()
        timeout = int(row[0]) if row else 0
        try:  # restored whatever is raised, a signal's exception right after the PRAGMA too
            conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                return False
            raise
        finally:
            conn.execute(f"PRAGMA busy_timeout = {timeout:d}")
        return True

    async def commit(self) -> None:
        """``COMMIT`` (syncs the WAL with ``synchronous=FULL``)."""
        await self.run(self.execute, "COMMIT")

    async def rollback(self) -> None:
        """``ROLLBACK`` whatever transaction is open (none: nothing happens)."""
        if self.conn.in_transaction:
            await self.run(self.execute, "ROLLBACK")
