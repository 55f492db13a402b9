"""`LoopConnection.begin_immediate`: inline when the writer lock is free, waited for when not.

Async paths run under asyncio debug (the suite's default loop) and the connection's sync
statements are only ever called from the loop or its one worker thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from foldwise.gateway.storage._sqlite_conn import LoopConnection


async def _open(path: Path, timeout_ms: int) -> LoopConnection:
    conn = LoopConnection(str(path))
    await conn.open()
    conn.execute(f"PRAGMA busy_timeout = {timeout_ms:d}")
    conn.fetchone("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
    return conn


def _timeout(conn: LoopConnection) -> int:
    row = conn.fetchone("PRAGMA busy_timeout")
    assert row is not None
    return int(row[0])


async def test_a_free_lock_is_taken_on_the_loop_without_the_worker(tmp_path: Path) -> None:
    conn = await _open(tmp_path / "db.sqlite", 5000)
    hops: list[object] = []
    original = conn.run

    async def counting(fn: object, *args: object) -> object:
        hops.append(fn)
        return await original(fn, *args)  # type: ignore[arg-type]

    conn.run = counting  # type: ignore[method-assign]
    try:
        await conn.begin_immediate()
        assert conn.conn.in_transaction and hops == []
        conn.execute("INSERT INTO t VALUES ('a')")
        await conn.commit()
        assert len(hops) == 1  # the commit's sync only
        assert _timeout(conn) == 5000  # restored
    finally:
        await conn.close()


async def test_a_held_lock_is_waited_for_in_the_worker_thread(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = await _open(path, 5000)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    try:
        released.start()
        waiting = asyncio.create_task(conn.begin_immediate())
        await asyncio.sleep(0.1)
        assert not waiting.done()  # waiting in the worker thread; the loop is free
        await asyncio.wait_for(waiting, 5)
        assert conn.conn.in_transaction
        await conn.commit()
        assert _timeout(conn) == 5000
    finally:
        released.join()
        other.close()
        await conn.close()


async def test_a_lock_held_past_the_busy_timeout_fails_as_before(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = await _open(path, 200)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await conn.begin_immediate()
        assert not conn.conn.in_transaction and _timeout(conn) == 200
    finally:
        other.execute("ROLLBACK")
        other.close()
        await conn.close()


class _InterruptedAfterPragma:
    """A connection double: the exception of a signal arrives right after one statement."""

    def __init__(self, conn: sqlite3.Connection, after: str) -> None:
        self._conn = conn
        self._after = after

    def execute(self, sql: str, *params: object) -> sqlite3.Cursor:
        cursor = self._conn.execute(sql, *params)
        if sql == self._after:
            self._after = ""
            raise KeyboardInterrupt
        return cursor


async def test_the_busy_timeout_is_restored_when_interrupted_after_setting_it(
    tmp_path: Path,
) -> None:
    conn = await _open(tmp_path / "db.sqlite", 5000)
    real = conn.conn
    conn._conn = _InterruptedAfterPragma(real, "PRAGMA busy_timeout = 0")  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            await conn.begin_immediate()
    finally:
        conn._conn = real
    try:
        assert _timeout(conn) == 5000 and not conn.conn.in_transaction
    finally:
        await conn.close()
