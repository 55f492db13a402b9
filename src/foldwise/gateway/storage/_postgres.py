"""Postgres implementation of `GatewayStorage` (psycopg 3 async + `psycopg_pool`).

All tables live in one schema (``foldwise`` by default). Several workers may share the
database: migrations run under a transaction-scoped advisory lock, transcript appends lock the
thread row (``FOR NO KEY UPDATE``) so `seq` numbers are consecutive, and thread leases are one
atomic ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired`` judged by the database clock, so
worker clock skew does not matter.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import errors as pg_errors
from psycopg import sql

from foldwise.errors import ThreadNotFoundError
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
from foldwise.gateway.storage._postgres_base import Conn, PostgresBase, from_db_time
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

__all__ = ["PostgresGatewayStorage"]

logger = logging.getLogger(__name__)

_ORDER = {
    "created_at": "created_at DESC, thread_id DESC",
    "updated_at": "updated_at DESC, thread_id DESC",
}


def _thread(row: Any) -> ThreadRecord:
    return thread_from_row(row, from_db_time, loads_object)


def _run(row: Any) -> RunRecord:
    return run_from_row(row, from_db_time, loads_object)


def _entry(row: Any) -> TranscriptEntry:
    return transcript_from_row(row, from_db_time, loads_object)


class PostgresGatewayStorage(PostgresBase):
    """Gateway tables in a Postgres schema, shared safely by several worker processes.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        schema: The schema holding the tables (created by `setup`).
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens.
        connect_timeout: Seconds to wait for the first connection in `setup`.
    """

    # threads ---------------------------------------------------------------------------------

    async def create_thread(
        self, thread_id: str, metadata: Mapping[str, Any] | None = None
    ) -> ThreadRecord:
        """Create an `idle` thread; raise `ThreadExistsError` when the id is taken."""
        tid = validate_thread_id(thread_id)
        meta = encode_metadata(metadata)
        now = utcnow()
        async with self.connection("create_thread", tid) as conn:
            row = await self.fetchone(
                conn,
                self.q(
                    "INSERT INTO {schema}.threads (thread_id, created_at, updated_at, metadata, "
                    "status) VALUES (%s, %s, %s, %s::jsonb, 'idle') "
                    f"ON CONFLICT (thread_id) DO NOTHING RETURNING {THREAD_COLUMNS}"
                ),
                (tid, now, now, meta),
            )
        if row is None:
            raise ThreadExistsError(tid)
        return _thread(row)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread, or `None`."""
        tid = validate_thread_id(thread_id)
        async with self.connection("get_thread", tid) as conn:
            row = await self.fetchone(
                conn,
                self.q(f"SELECT {THREAD_COLUMNS} FROM {{schema}}.threads WHERE thread_id = %s"),
                (tid,),
            )
        return None if row is None else _thread(row)

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
        patch = encode_metadata(metadata)
        async with self.connection("update_thread", tid) as conn:
            row = await self.fetchone(
                conn,
                self.q(
                    "UPDATE {schema}.threads SET metadata = metadata || %(patch)s::jsonb, "
                    "status = COALESCE(%(status)s, status), updated_at = %(now)s "
                    f"WHERE thread_id = %(tid)s RETURNING {THREAD_COLUMNS}"
                ),
                {"patch": patch, "status": status, "now": utcnow(), "tid": tid},
            )
        return None if row is None else _thread(row)

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread and everything recorded for it; `False` if it did not exist."""
        tid = validate_thread_id(thread_id)
        async with self.connection("delete_thread", tid) as conn:
            cursor = await conn.execute(
                self.q("DELETE FROM {schema}.threads WHERE thread_id = %s"), (tid,)
            )
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
        conditions = [sql.SQL("TRUE")]
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if metadata:
            conditions.append(sql.SQL("metadata @> %(meta)s::jsonb"))
            params["meta"] = encode_metadata(metadata)
        if status is not None:
            conditions.append(sql.SQL("status = %(status)s"))
            params["status"] = status
        query = sql.SQL(
            "SELECT {columns} FROM {schema}.threads WHERE {where} "
            "ORDER BY {order} LIMIT %(limit)s OFFSET %(offset)s"
        ).format(
            columns=sql.SQL(THREAD_COLUMNS),
            schema=sql.Identifier(self.schema),
            where=sql.SQL(" AND ").join(conditions),
            order=sql.SQL(_ORDER[sort_by]),
        )
        async with self.connection("search_threads", None) as conn:
            rows = await self.fetchall(conn, query, params)
        return [_thread(row) for row in rows]

    # runs ------------------------------------------------------------------------------------

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
        now = utcnow()
        async with self.connection("create_run", thread_id) as conn:
            try:
                row = await self.fetchone(
                    conn,
                    self.q(
                        f"INSERT INTO {{schema}}.runs ({RUN_COLUMNS}) "
                        "VALUES (%s, %s, %s, %s, 'running', NULL, %s::jsonb, %s, %s) "
                        f"RETURNING {RUN_COLUMNS}"
                    ),
                    (run_id, thread_id, assistant, kind, meta, now, now),
                )
            except pg_errors.ForeignKeyViolation as exc:
                raise ThreadNotFoundError(thread_id) from exc
            except pg_errors.UniqueViolation as exc:
                raise RunExistsError(run_id) from exc
        if row is None:  # pragma: no cover - INSERT ... RETURNING always yields the row
            raise RunExistsError(run_id)
        return _run(row)

    async def finish_run(
        self, run_id: str, status: RunStatus, error: str | None = None
    ) -> RunRecord | None:
        """Finish a `running` run; a run already finished is returned unchanged."""
        error_text = check_finish_args(run_id, status, error)
        async with self.connection("finish_run", None) as conn:
            row = await self.fetchone(
                conn,
                self.q(
                    "UPDATE {schema}.runs SET status = %s, error = %s, updated_at = %s "
                    f"WHERE run_id = %s AND status = 'running' RETURNING {RUN_COLUMNS}"
                ),
                (status, error_text, utcnow(), run_id),
            )
            if row is not None:
                return _run(row)
            row = await self.fetchone(
                conn,
                self.q(f"SELECT {RUN_COLUMNS} FROM {{schema}}.runs WHERE run_id = %s"),
                (run_id,),
            )
        if row is None:
            return None
        logger.warning(
            "finish_run(%s, %s) on thread %s ignored: the run already finished as %s",
            run_id,
            status,
            row[1],
            row[4],
        )
        return _run(row)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run, or `None`."""
        validate_run_id(run_id)
        async with self.connection("get_run", None) as conn:
            row = await self.fetchone(
                conn,
                self.q(f"SELECT {RUN_COLUMNS} FROM {{schema}}.runs WHERE run_id = %s"),
                (run_id,),
            )
        return None if row is None else _run(row)

    async def list_runs(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        tid = validate_thread_id(thread_id)
        check_page(limit, offset)
        async with self.connection("list_runs", tid) as conn:
            rows = await self.fetchall(
                conn,
                self.q(
                    f"SELECT {RUN_COLUMNS} FROM {{schema}}.runs WHERE thread_id = %s "
                    "ORDER BY created_at DESC, run_id DESC LIMIT %s OFFSET %s"
                ),
                (tid, limit, offset),
            )
        return [_run(row) for row in rows]

    # transcript ------------------------------------------------------------------------------

    async def _append(
        self, conn: Conn, thread_id: str, events: Sequence[PreparedEvent]
    ) -> list[TranscriptEntry]:
        # The caller holds the thread row lock, so MAX(seq) cannot move until commit.
        ids = [e.message_id for e in events if e.message_id is not None]
        stored: set[str] = set()
        if ids:
            rows = await self.fetchall(
                conn,
                self.q(
                    "SELECT message_id FROM {schema}.transcript_events "
                    "WHERE thread_id = %s AND message_id = ANY(%s)"
                ),
                (thread_id, ids),
            )
            stored = {row[0] for row in rows}
        kept = dedupe_events(events, stored)
        if not kept:
            return []
        row = await self.fetchone(
            conn,
            self.q(
                "SELECT COALESCE(MAX(seq), 0) FROM {schema}.transcript_events WHERE thread_id = %s"
            ),
            (thread_id,),
        )
        first = int(row[0]) + 1 if row else 1
        rows_out = [
            (thread_id, first + i, e.kind, e.run_id, e.message_id, e.message, e.created_at)
            for i, e in enumerate(kept)
        ]
        async with conn.cursor() as cursor:
            await cursor.executemany(
                self.q(
                    f"INSERT INTO {{schema}}.transcript_events ({TRANSCRIPT_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)"
                ),
                rows_out,
            )
        return [_entry((*r[:5], loads_object(r[5]), r[6])) for r in rows_out]

    async def append_transcript(
        self, thread_id: str, events: Sequence[TranscriptEvent]
    ) -> list[TranscriptEntry]:
        """Append events atomically with consecutive new `seq` numbers; skip known message ids."""
        tid = validate_thread_id(thread_id)
        prepared = prepare_events(events, utcnow())
        if not prepared:
            return []
        async with self.transaction("append_transcript", tid) as conn:
            await self.lock_thread_row(conn, tid)
            return await self._append(conn, tid, prepared)

    async def list_transcript(
        self, thread_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[TranscriptEntry]:
        """Entries with `seq > after_seq`, ascending, at most `limit`."""
        tid = validate_thread_id(thread_id)
        check_page(limit)
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
            raise ValueError(f"after_seq must be a non-negative integer, got {after_seq!r}")
        async with self.connection("list_transcript", tid) as conn:
            rows = await self.fetchall(
                conn,
                self.q(
                    f"SELECT {TRANSCRIPT_COLUMNS} FROM {{schema}}.transcript_events "
                    "WHERE thread_id = %s AND seq > %s ORDER BY seq LIMIT %s"
                ),
                (tid, after_seq, limit),
            )
        return [_entry(row) for row in rows]

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
        prepared = prepare_events([marker], utcnow()) if marker is not None else []
        key = _receipt_key(receipt)
        async with self.transaction("add_receipt", tid) as conn:
            await self.lock_thread_row(conn, tid)
            row = None
            if key is not None:
                row = await self.fetchone(
                    conn,
                    self.q(
                        f"SELECT {RECEIPT_COLUMNS} FROM {{schema}}.receipts "
                        "WHERE thread_id = %s AND receipt_key = %s"
                    ),
                    (tid, key),
                )
            if row is None:
                row = await self.fetchone(
                    conn,
                    self.q(
                        "INSERT INTO {schema}.receipts "
                        "(thread_id, run_id, receipt, created_at, receipt_key) "
                        f"VALUES (%s, %s, %s::jsonb, %s, %s) RETURNING {RECEIPT_COLUMNS}"
                    ),
                    (tid, run_id, body, utcnow(), key),
                )
                if prepared:
                    await self._append(conn, tid, prepared)
        if row is None:  # pragma: no cover - INSERT ... RETURNING always yields the row
            raise ThreadNotFoundError(tid)
        return receipt_from_row(row, from_db_time, loads_object)

    async def list_receipts(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[ReceiptRecord]:
        """The thread's receipts, oldest first."""
        tid = validate_thread_id(thread_id)
        check_page(limit, offset)
        async with self.connection("list_receipts", tid) as conn:
            rows = await self.fetchall(
                conn,
                self.q(
                    f"SELECT {RECEIPT_COLUMNS} FROM {{schema}}.receipts WHERE thread_id = %s "
                    "ORDER BY receipt_id LIMIT %s OFFSET %s"
                ),
                (tid, limit, offset),
            )
        return [receipt_from_row(r, from_db_time, loads_object) for r in rows]

    # thread leases ---------------------------------------------------------------------------

    async def acquire_thread_lock(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> bool:
        """Take the thread's lease if it is free or expired; `False` if someone holds it."""
        holder_text, kind_text, ttl = check_lock_args(thread_id, holder, kind, ttl_seconds)
        async with self.connection("acquire_thread_lock", thread_id) as conn:
            try:
                row = await self.fetchone(
                    conn,
                    self.q(
                        f"INSERT INTO {{schema}}.thread_locks AS l ({LOCK_COLUMNS}) "
                        "VALUES (%(t)s, %(h)s, %(k)s, clock_timestamp(), "
                        "clock_timestamp() + make_interval(secs => %(ttl)s)) "
                        "ON CONFLICT (thread_id) DO UPDATE SET holder = EXCLUDED.holder, "
                        "kind = EXCLUDED.kind, acquired_at = EXCLUDED.acquired_at, "
                        "expires_at = EXCLUDED.expires_at "
                        "WHERE l.expires_at <= clock_timestamp() RETURNING l.holder"
                    ),
                    {"t": thread_id, "h": holder_text, "k": kind_text, "ttl": ttl},
                )
            except pg_errors.ForeignKeyViolation as exc:
                raise ThreadNotFoundError(thread_id) from exc
        return row is not None

    async def renew_thread_lock(self, thread_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend the lease to now + ttl if `holder` still holds it."""
        holder_text, _, ttl = check_lock_args(thread_id, holder, None, ttl_seconds)
        async with self.connection("renew_thread_lock", thread_id) as conn:
            cursor = await conn.execute(
                self.q(
                    "UPDATE {schema}.thread_locks "
                    "SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                    "WHERE thread_id = %s AND holder = %s"
                ),
                (ttl, thread_id, holder_text),
            )
            return cursor.rowcount > 0

    async def release_thread_lock(self, thread_id: str, holder: str) -> bool:
        """Release the lease if `holder` holds it; `False` otherwise."""
        holder_text, _, _ = check_lock_args(thread_id, holder)
        async with self.connection("release_thread_lock", thread_id) as conn:
            cursor = await conn.execute(
                self.q("DELETE FROM {schema}.thread_locks WHERE thread_id = %s AND holder = %s"),
                (thread_id, holder_text),
            )
            return cursor.rowcount > 0

    async def get_thread_lock(self, thread_id: str) -> ThreadLock | None:
        """The live (unexpired) lease on the thread, or `None`."""
        tid = validate_thread_id(thread_id)
        async with self.connection("get_thread_lock", tid) as conn:
            row = await self.fetchone(
                conn,
                self.q(
                    f"SELECT {LOCK_COLUMNS} FROM {{schema}}.thread_locks "
                    "WHERE thread_id = %s AND expires_at > clock_timestamp()"
                ),
                (tid,),
            )
        return None if row is None else lock_from_row(row, from_db_time)


def _receipt_key(receipt: Mapping[str, Any]) -> str | None:
    """The receipt's own id, which makes `add_receipt` idempotent."""
    key = receipt.get("id")
    return str(key) if key is not None else None
