"""SQLite implementation of `GatewayStorage` (aiosqlite).

One connection per instance, serialized by an `asyncio.Lock`. Every write runs in
``BEGIN IMMEDIATE``, which takes SQLite's single writer lock up front: concurrent writers in
other connections or processes wait (up to `busy_timeout_ms`) instead of failing half-way, and
the per-thread transcript `seq` is assigned under that lock. WAL journal, foreign keys on,
``synchronous=FULL`` by default (a committed transaction survives power loss, not only a
process crash).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite

from foldwise.gateway.storage._base import (
    LOCK_COLUMNS,
    RECEIPT_COLUMNS,
    RUN_COLUMNS,
    THREAD_COLUMNS,
    TRANSCRIPT_COLUMNS,
    PreparedEvent,
    check_finish_args,
    check_lock_args,
    check_run_args,
    check_thread_status,
    dedupe_events,
    encode_metadata,
    lock_from_row,
    prepare_events,
    receipt_from_row,
    run_from_row,
    thread_from_row,
    transcript_from_row,
)
from foldwise.gateway.storage._codec import check_page, dumps, loads_object, utcnow
from foldwise.gateway.storage._errors import RunExistsError, ThreadExistsError
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._protocol import ThreadSortKey
from foldwise.gateway.storage._records import (
    ReceiptRecord,
    RunKind,
    RunRecord,
    RunStatus,
    ThreadLock,
    ThreadRecord,
    ThreadStatus,
    TranscriptEntry,
    TranscriptEvent,
)
from foldwise.gateway.storage._sqlite_base import SqliteBase, from_epoch, from_text, to_text

__all__ = ["SqliteGatewayStorage"]

logger = logging.getLogger(__name__)

_ORDER = {
    "created_at": "created_at DESC, thread_id DESC",
    "updated_at": "updated_at DESC, thread_id DESC",
}


class SqliteGatewayStorage(SqliteBase):
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

    # threads ---------------------------------------------------------------------------------

    def _thread(self, row: Any) -> ThreadRecord:
        return thread_from_row(row, from_text, loads_object)

    async def create_thread(
        self, thread_id: str, metadata: Mapping[str, Any] | None = None
    ) -> ThreadRecord:
        """Create an `idle` thread; raise `ThreadExistsError` when the id is taken."""
        tid = validate_thread_id(thread_id)
        meta = encode_metadata(metadata)
        now = to_text(utcnow())
        async with self._write("create_thread", tid) as conn:
            cursor = await conn.execute(
                "INSERT INTO threads (thread_id, created_at, updated_at, metadata, status) "
                "VALUES (?, ?, ?, ?, 'idle') ON CONFLICT (thread_id) DO NOTHING",
                (tid, now, now, meta),
            )
            if cursor.rowcount == 0:
                raise ThreadExistsError(tid)
        return self._thread((tid, now, now, meta, "idle"))

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread, or `None`."""
        tid = validate_thread_id(thread_id)
        async with self._read("get_thread", tid) as conn:
            row = await self._fetchone(
                conn, f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = ?", (tid,)
            )
        return None if row is None else self._thread(row)

    async def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> ThreadRecord | None:
        """Shallow-merge `metadata` into the thread's and/or set `status`; `None` if missing."""
        tid = validate_thread_id(thread_id)
        check_thread_status(status)
        patch = loads_object(encode_metadata(metadata))
        now = to_text(utcnow())
        async with self._write("update_thread", tid) as conn:
            row = await self._fetchone(
                conn, f"SELECT {THREAD_COLUMNS} FROM threads WHERE thread_id = ?", (tid,)
            )
            if row is None:
                return None
            merged = dumps({**loads_object(row[3]), **patch})
            new_status = status or row[4]
            await conn.execute(
                "UPDATE threads SET metadata = ?, status = ?, updated_at = ? WHERE thread_id = ?",
                (merged, new_status, now, tid),
            )
        return self._thread((tid, row[1], now, merged, new_status))

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and everything recorded for it; `False` if it did not exist."""
        tid = validate_thread_id(thread_id)
        async with self._write("delete_thread", tid) as conn:
            cursor = await conn.execute("DELETE FROM threads WHERE thread_id = ?", (tid,))
            return cursor.rowcount > 0

    async def search_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        status: ThreadStatus | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: ThreadSortKey = "created_at",
    ) -> list[ThreadRecord]:
        """Threads whose metadata contains `metadata` (JSON containment), newest first."""
        check_thread_status(status)
        check_page(limit, offset)
        if sort_by not in _ORDER:
            raise ValueError(f"sort_by must be one of {sorted(_ORDER)}, got {sort_by!r}")
        params = {
            "meta": None if not metadata else encode_metadata(metadata),
            "status": status,
            "limit": limit,
            "offset": offset,
        }
        query = (
            f"SELECT {THREAD_COLUMNS} FROM threads "
            "WHERE (:meta IS NULL OR foldwise_json_contains(metadata, :meta)) "
            "AND (:status IS NULL OR status = :status) "
            f"ORDER BY {_ORDER[sort_by]} LIMIT :limit OFFSET :offset"
        )
        async with self._read("search_threads", None) as conn:
            rows = await self._fetchall(conn, query, params)
        return [self._thread(row) for row in rows]

    # runs ------------------------------------------------------------------------------------

    def _run(self, row: Any) -> RunRecord:
        return run_from_row(row, from_text, loads_object)

    async def create_run(
        self,
        thread_id: str,
        run_id: str,
        assistant_id: str,
        kind: RunKind = "run",
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Record a `running` run; `ThreadNotFoundError` / `RunExistsError` on conflicts."""
        assistant = check_run_args(thread_id, run_id, assistant_id, kind)
        meta = encode_metadata(metadata)
        now = to_text(utcnow())
        row = (run_id, thread_id, assistant, kind, "running", None, meta, now, now)
        async with self._write("create_run", thread_id) as conn:
            await self._require_thread(conn, thread_id)
            cursor = await conn.execute(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                row,
            )
            if cursor.rowcount == 0:
                raise RunExistsError(run_id)
        return self._run(row)

    async def finish_run(
        self, run_id: str, status: RunStatus, error: str | None = None
    ) -> RunRecord | None:
        """Finish a `running` run; a run already finished is returned unchanged."""
        error_text = check_finish_args(run_id, status, error)
        now = to_text(utcnow())
        async with self._write("finish_run", None) as conn:
            cursor = await conn.execute(
                "UPDATE runs SET status = ?, error = ?, updated_at = ? "
                "WHERE run_id = ? AND status = 'running'",
                (status, error_text, now, run_id),
            )
            changed = cursor.rowcount > 0
            row = await self._fetchone(
                conn, f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            )
        if row is not None and not changed:
            logger.warning(
                "finish_run(%s, %s) on thread %s ignored: the run already finished as %s",
                run_id,
                status,
                row[1],
                row[4],
            )
        return None if row is None else self._run(row)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run, or `None`."""
        validate_run_id(run_id)
        async with self._read("get_run", None) as conn:
            row = await self._fetchone(
                conn, f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            )
        return None if row is None else self._run(row)

    async def list_runs(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        tid = validate_thread_id(thread_id)
        check_page(limit, offset)
        async with self._read("list_runs", tid) as conn:
            rows = await self._fetchall(
                conn,
                f"SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = ? "
                "ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?",
                (tid, limit, offset),
            )
        return [self._run(row) for row in rows]

    # transcript ------------------------------------------------------------------------------

    async def _append(
        self, conn: aiosqlite.Connection, thread_id: str, events: Sequence[PreparedEvent]
    ) -> list[TranscriptEntry]:
        # Runs inside BEGIN IMMEDIATE: no other writer can interleave until COMMIT.
        ids = [e.message_id for e in events if e.message_id is not None]
        stored: set[str] = set()
        if ids:
            rows = await self._fetchall(
                conn,
                "SELECT message_id FROM transcript_events WHERE thread_id = ? "
                "AND message_id IN (SELECT value FROM json_each(?))",
                (thread_id, dumps(ids)),
            )
            stored = {row[0] for row in rows}
        kept = dedupe_events(events, stored)
        if not kept:
            return []
        row = await self._fetchone(
            conn,
            "SELECT COALESCE(MAX(seq), 0) FROM transcript_events WHERE thread_id = ?",
            (thread_id,),
        )
        first = int(row[0]) + 1
        rows_out = [
            (thread_id, first + i, e.kind, e.run_id, e.message_id, e.message, to_text(e.created_at))
            for i, e in enumerate(kept)
        ]
        await conn.executemany(
            f"INSERT INTO transcript_events ({TRANSCRIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows_out,
        )
        return [transcript_from_row(r, from_text, loads_object) for r in rows_out]

    async def append_transcript(
        self, thread_id: str, events: Sequence[TranscriptEvent]
    ) -> list[TranscriptEntry]:
        """Append events atomically with consecutive new `seq` numbers; skip known message ids."""
        tid = validate_thread_id(thread_id)
        prepared = prepare_events(events, utcnow())
        if not prepared:
            return []
        async with self._write("append_transcript", tid) as conn:
            await self._require_thread(conn, tid)
            return await self._append(conn, tid, prepared)

    async def list_transcript(
        self, thread_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[TranscriptEntry]:
        """Entries with `seq > after_seq`, ascending, at most `limit`."""
        tid = validate_thread_id(thread_id)
        check_page(limit)
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
            raise ValueError(f"after_seq must be a non-negative integer, got {after_seq!r}")
        async with self._read("list_transcript", tid) as conn:
            rows = await self._fetchall(
                conn,
                f"SELECT {TRANSCRIPT_COLUMNS} FROM transcript_events "
                "WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (tid, after_seq, limit),
            )
        return [transcript_from_row(r, from_text, loads_object) for r in rows]

    # receipts --------------------------------------------------------------------------------

    async def add_receipt(
        self,
        thread_id: str,
        receipt: Mapping[str, Any],
        *,
        run_id: str | None = None,
        marker: TranscriptEvent | None = None,
    ) -> ReceiptRecord:
        """Store a compaction receipt (and, in the same transaction, an optional marker)."""
        tid = validate_thread_id(thread_id)
        if run_id is not None:
            validate_run_id(run_id)
        if not isinstance(receipt, Mapping):
            raise ValueError("receipt must be a mapping (a JSON object)")
        body = dumps(dict(receipt))
        now = to_text(utcnow())
        prepared = prepare_events([marker], utcnow()) if marker is not None else []
        key = _receipt_key(receipt)
        async with self._write("add_receipt", tid) as conn:
            await self._require_thread(conn, tid)
            if key is not None:
                existing = await self._fetchall(
                    conn,
                    f"SELECT {RECEIPT_COLUMNS} FROM receipts "
                    "WHERE thread_id = ? AND receipt_key = ?",
                    (tid, key),
                )
                if existing:  # a retry of the same compaction: stored once, marker once
                    return receipt_from_row(existing[0], from_text, loads_object)
            cursor = await conn.execute(
                "INSERT INTO receipts (thread_id, run_id, receipt, created_at, receipt_key) "
                "VALUES (?, ?, ?, ?, ?)",
                (tid, run_id, body, now, key),
            )
            receipt_id = cursor.lastrowid
            if prepared:
                await self._append(conn, tid, prepared)
        return receipt_from_row((receipt_id, tid, run_id, body, now), from_text, loads_object)

    async def list_receipts(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[ReceiptRecord]:
        """The thread's receipts, oldest first."""
        tid = validate_thread_id(thread_id)
        check_page(limit, offset)
        async with self._read("list_receipts", tid) as conn:
            rows = await self._fetchall(
                conn,
                f"SELECT {RECEIPT_COLUMNS} FROM receipts WHERE thread_id = ? "
                "ORDER BY receipt_id LIMIT ? OFFSET ?",
                (tid, limit, offset),
            )
        return [receipt_from_row(r, from_text, loads_object) for r in rows]

    # thread leases ---------------------------------------------------------------------------

    async def acquire_thread_lock(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> bool:
        """Take the thread's lease if it is free or expired; `False` if someone holds it."""
        holder_text, kind_text, ttl = check_lock_args(thread_id, holder, kind, ttl_seconds)
        async with self._write("acquire_thread_lock", thread_id) as conn:
            await self._require_thread(conn, thread_id)
            now = time.time()
            cursor = await conn.execute(
                f"INSERT INTO thread_locks ({LOCK_COLUMNS}) VALUES (:t, :h, :k, :now, :exp) "
                "ON CONFLICT (thread_id) DO UPDATE SET holder = excluded.holder, "
                "kind = excluded.kind, acquired_at = excluded.acquired_at, "
                "expires_at = excluded.expires_at WHERE thread_locks.expires_at <= :now",
                {"t": thread_id, "h": holder_text, "k": kind_text, "now": now, "exp": now + ttl},
            )
            return cursor.rowcount > 0

    async def renew_thread_lock(self, thread_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend the lease to now + ttl if `holder` still holds it."""
        holder_text, _, ttl = check_lock_args(thread_id, holder, None, ttl_seconds)
        async with self._write("renew_thread_lock", thread_id) as conn:
            cursor = await conn.execute(
                "UPDATE thread_locks SET expires_at = ? WHERE thread_id = ? AND holder = ?",
                (time.time() + ttl, thread_id, holder_text),
            )
            return cursor.rowcount > 0

    async def release_thread_lock(self, thread_id: str, holder: str) -> bool:
        """Release the lease if `holder` holds it; `False` otherwise."""
        holder_text, _, _ = check_lock_args(thread_id, holder)
        async with self._write("release_thread_lock", thread_id) as conn:
            cursor = await conn.execute(
                "DELETE FROM thread_locks WHERE thread_id = ? AND holder = ?",
                (thread_id, holder_text),
            )
            return cursor.rowcount > 0

    async def get_thread_lock(self, thread_id: str) -> ThreadLock | None:
        """The live (unexpired) lease on the thread, or `None`."""
        tid = validate_thread_id(thread_id)
        async with self._read("get_thread_lock", tid) as conn:
            row = await self._fetchone(
                conn,
                f"SELECT {LOCK_COLUMNS} FROM thread_locks WHERE thread_id = ? AND expires_at > ?",
                (tid, time.time()),
            )
        return None if row is None else lock_from_row(row, from_epoch)


def _receipt_key(receipt: Mapping[str, Any]) -> str | None:
    """The receipt's own id, which makes `add_receipt` idempotent."""
    key = receipt.get("id")
    return str(key) if key is not None else None
