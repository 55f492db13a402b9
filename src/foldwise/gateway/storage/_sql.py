"""`SqlGatewayStorage`: the one SQL implementation of `GatewayStorage`.

Every query is written once here; a `Dialect` supplies what differs between databases
(placeholders, table prefix, JSON binding, clock, row locks, connections, migrations). Writes
run in one transaction each: SQLite takes its single writer lock up front (``BEGIN
IMMEDIATE``), Postgres locks the rows it reads (``FOR KEY SHARE`` / ``FOR NO KEY UPDATE`` on
the thread, so transcript `seq` numbers stay consecutive across workers). Lease times are
judged by the database clock, so worker clock skew does not matter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from foldwise.errors import ThreadNotFoundError
from foldwise.gateway.storage._base import (
    LOCK_COLUMNS,
    RUN_COLUMNS,
    THREAD_COLUMNS,
    check_finish_args,
    check_lock_args,
    check_run_args,
    check_thread_status,
    encode_metadata,
    from_row,
)
from foldwise.gateway.storage._codec import check_page, dumps, loads_object, utcnow
from foldwise.gateway.storage._dialect import Dialect, Row, Session
from foldwise.gateway.storage._errors import GatewayStorageError, RunExistsError, ThreadExistsError
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._migrations import check_not_newer, pending_migrations
from foldwise.gateway.storage._records import (
    RunKind,
    RunRecord,
    RunStatus,
    ThreadLock,
    ThreadRecord,
    ThreadSortKey,
    ThreadStatus,
)
from foldwise.gateway.storage._sql_overview import SqlOverviewMixin
from foldwise.gateway.storage._sql_queue import SqlQueueMixin

__all__ = ["GatewayStorage", "SqlGatewayStorage"]

logger = logging.getLogger(__name__)

_ORDER = {
    "created_at": "created_at DESC, thread_id DESC",
    "updated_at": "updated_at DESC, thread_id DESC",
}
_THREAD_BY_ID = f"SELECT {THREAD_COLUMNS} FROM {{p}}threads WHERE thread_id = ?"
_RUN_BY_ID = f"SELECT {RUN_COLUMNS} FROM {{p}}runs WHERE run_id = ?"
_ACQUIRE = (
    f"INSERT INTO {{p}}thread_locks AS l ({LOCK_COLUMNS}) VALUES (?, ?, ?, {{now}}, {{later}}, 1) "
    "ON CONFLICT (thread_id) DO UPDATE SET holder = excluded.holder, kind = excluded.kind, "
    "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, token = l.token + 1 "
    f"WHERE l.expires_at <= {{now}} RETURNING {LOCK_COLUMNS}"
)
LEASE_CHECK = (
    "SELECT 1 FROM {p}thread_locks WHERE thread_id = ? AND holder = ? AND token = ? "
    "AND expires_at > {now}{share}"
)
"""The fencing check: the lease is still this holder's, with this token, and unexpired."""


def _holder_match(thread_id: str, holder: str, token: int | None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause naming one holder's lease, and its arguments (`token`: this one)."""
    if token is None:
        return "WHERE thread_id = ? AND holder = ?", (thread_id, holder)
    return "WHERE thread_id = ? AND holder = ? AND token = ?", (thread_id, holder, int(token))


def _check_owner(owner: str) -> str:
    if not isinstance(owner, str) or len(owner) > 256 or "\x00" in owner:
        raise ValueError("owner must be a string of at most 256 characters without NUL")
    return owner


class SqlGatewayStorage(SqlQueueMixin, SqlOverviewMixin):
    """Threads, runs, transcript events, compaction receipts and thread leases in SQL.

    Every method validates thread and run ids before any SQL (`InvalidThreadIdError`,
    `InvalidRunIdError`), and wraps database failures in `GatewayStorageError` (a
    `foldwise.errors.StorageError`). A missing row is `None` (or `False`) for lookups and
    `ThreadNotFoundError` where the operation needs the thread.

    Use the backend classes (`SqliteGatewayStorage`, `PostgresGatewayStorage`) or
    ``async with open_storage(url) as storage: ...`` (or call `setup` and `aclose`); this
    class holds everything they share, and the `Dialect` says which database it talks to.

    Args:
        dialect: The database's dialect (it owns the connection).
    """

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._setup_lock = asyncio.Lock()
        self.backend: str = dialect.backend
        """``"sqlite"`` or ``"postgres"``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._dialect!r})"

    def lease_check_sql(self) -> str:
        """The fencing check in the driver's own placeholder style (thread, holder, token).

        Returns:
            A `SELECT` that yields a row only while the lease is held; on Postgres it also
            share-locks the lease row until the end of the caller's transaction.
        """
        return self._dialect.native(self._dialect.sql(LEASE_CHECK))

    @asynccontextmanager
    async def batch(self, operation: str, thread_id: str | None = None) -> AsyncIterator[None]:
        """Run this task's storage calls inside it as one transaction (one commit).

        Every method called by the same task until the block ends joins the transaction; an
        error rolls all of it back. Do not catch a storage error inside and go on.
        """
        async with self._dialect.batch(operation, thread_id):
            yield

    # lifecycle -------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Connect (once) and apply pending numbered migrations in one transaction.

        Idempotent, and safe to run concurrently from several workers.
        """
        async with self._setup_lock:
            await self._dialect.open()
            await self._migrate()

    async def _migrate(self) -> None:
        d = self._dialect
        async with d.write("setup", None) as s:
            for statement, params in d.setup_statements():
                await s.execute(statement, params)
            applied = [
                int(r[0])
                for r in await s.fetchall(d.sql("SELECT version FROM {p}schema_migrations"))
            ]
            problem = check_not_newer(applied)
            if problem:
                raise GatewayStorageError(problem, operation="setup")
            for migration in pending_migrations(applied):
                for statement in d.migration_statements(migration):
                    await s.execute(statement)
                await s.execute(
                    d.sql(
                        "INSERT INTO {p}schema_migrations (version, name, applied_at) "
                        "VALUES (?, ?, ?)"
                    ),
                    (migration.version, migration.name, d.to_time(utcnow())),
                )
                logger.info(
                    "applied %s migration %d (%s) to %r",
                    d.backend,
                    migration.version,
                    migration.name,
                    self,
                )

    async def aclose(self) -> None:
        """Close every connection; safe to call twice."""
        await self._dialect.close()

    async def __aenter__(self) -> Self:
        await self.setup()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def ping(self) -> None:
        """Run ``SELECT 1``; raise `GatewayStorageError` when the database is unusable."""
        async with self._dialect.read("ping", None) as s:
            await s.fetchone("SELECT 1")

    async def schema_version(self) -> int:
        """Return the highest applied migration number (0 before `setup`)."""
        async with self._dialect.read("schema_version", None) as s:
            row = await s.fetchone(
                self._dialect.sql("SELECT MAX(version) FROM {p}schema_migrations")
            )
        return int(row[0] or 0) if row else 0

    async def _require_thread(self, s: Session, thread_id: str, lock: str = "{keyshare}") -> None:
        """Raise `ThreadNotFoundError` unless the thread exists; lock its row until commit."""
        query = self._dialect.sql("SELECT 1 FROM {p}threads WHERE thread_id = ?" + lock)
        if await s.fetchone(query, (thread_id,)) is None:
            raise ThreadNotFoundError(thread_id)

    # threads ---------------------------------------------------------------------------------

    def _thread(self, row: Row) -> ThreadRecord:
        return from_row(ThreadRecord, row, self._dialect.from_time)

    async def create_thread(
        self, thread_id: str, metadata: Mapping[str, Any] | None = None, *, owner: str = ""
    ) -> ThreadRecord:
        """Create an `idle` thread owned by `owner`; raise `ThreadExistsError` if the id is taken.

        The id is global: a thread of another owner makes it taken too.
        """
        tid = validate_thread_id(thread_id)
        meta = encode_metadata(metadata)
        owner = _check_owner(owner)
        now = self._dialect.to_time(utcnow())
        async with self._dialect.write("create_thread", tid) as s:
            row = await s.fetchone(
                self._dialect.sql(
                    f"INSERT INTO {{p}}threads ({THREAD_COLUMNS}) VALUES (?, ?, ?, {{json}}, "
                    f"'idle', ?) ON CONFLICT (thread_id) DO NOTHING RETURNING {THREAD_COLUMNS}"
                ),
                (tid, now, now, meta, owner),
            )
        if row is None:
            raise ThreadExistsError(tid)
        return self._thread(row)

    async def get_thread(self, thread_id: str, *, owner: str | None = None) -> ThreadRecord | None:
        """Return the thread, or `None` (also when `owner` is given and does not own it)."""
        tid = validate_thread_id(thread_id)
        query, params = _THREAD_BY_ID, [tid]
        if owner is not None:
            query, params = query + " AND owner = ?", [tid, _check_owner(owner)]
        async with self._dialect.read("get_thread", tid) as s:
            row = await s.fetchone(self._dialect.sql(query), params)
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
        d = self._dialect
        async with d.write("update_thread", tid) as s:
            row = await s.fetchone(d.sql(_THREAD_BY_ID + "{exclusive}"), (tid,))
            if row is None:
                return None
            merged = dumps({**loads_object(row[3]), **patch})
            row = await s.fetchone(
                d.sql(
                    "UPDATE {p}threads SET metadata = {json}, status = ?, updated_at = ? "
                    f"WHERE thread_id = ? RETURNING {THREAD_COLUMNS}"
                ),
                (merged, status or row[4], d.to_time(utcnow()), tid),
            )
        return None if row is None else self._thread(row)

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread with its runs, transcript, receipts and lock; `False` if missing."""
        tid = validate_thread_id(thread_id)
        async with self._dialect.write("delete_thread", tid) as s:
            query = self._dialect.sql("DELETE FROM {p}threads WHERE thread_id = ?")
            return await s.execute(query, (tid,)) > 0

    async def search_threads(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        status: ThreadStatus | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: ThreadSortKey = "created_at",
        owner: str | None = None,
    ) -> list[ThreadRecord]:
        """Threads whose metadata contains `metadata` (JSON containment), newest first.

        With `owner`, only that identity's threads.
        """
        check_thread_status(status)
        check_page(limit, offset)
        if sort_by not in _ORDER:
            raise ValueError(f"sort_by must be one of {sorted(_ORDER)}, got {sort_by!r}")
        conditions = ["1 = 1"]
        params: list[Any] = []
        if owner is not None:
            conditions.append("owner = ?")
            params.append(_check_owner(owner))
        if metadata:
            conditions.append(self._dialect.json_contains("metadata"))
            params.append(encode_metadata(metadata))
        if status is not None:
            conditions.append("status = ?")
            params.append(status)
        query = (
            f"SELECT {THREAD_COLUMNS} FROM {{p}}threads WHERE {' AND '.join(conditions)} "
            f"ORDER BY {_ORDER[sort_by]} LIMIT ? OFFSET ?"
        )
        params.extend((limit, offset))
        return await self._fetch_all(ThreadRecord, "search_threads", None, query, params)

    # runs ------------------------------------------------------------------------------------

    def _run(self, row: Row) -> RunRecord:
        return from_row(RunRecord, row, self._dialect.from_time)

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
        now = self._dialect.to_time(utcnow())
        async with self._dialect.write("create_run", thread_id) as s:
            await self._require_thread(s, thread_id)
            row = await s.fetchone(
                self._dialect.sql(
                    f"INSERT INTO {{p}}runs ({RUN_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, 'running', NULL, {json}, ?, ?) "
                    f"ON CONFLICT (run_id) DO NOTHING RETURNING {RUN_COLUMNS}"
                ),
                (run_id, thread_id, assistant, kind, meta, now, now),
            )
        if row is None:
            raise RunExistsError(run_id)
        return self._run(row)

    async def finish_run(
        self, run_id: str, status: RunStatus, error: str | None = None
    ) -> RunRecord | None:
        """Finish a `pending` or `running` run; a run already finished is returned unchanged."""
        error_text = check_finish_args(run_id, status, error)
        d = self._dialect
        async with d.write("finish_run", None) as s:
            row = await s.fetchone(
                d.sql(
                    "UPDATE {p}runs SET status = ?, error = ?, updated_at = ? "
                    "WHERE run_id = ? AND status IN ('pending', 'running') "
                    f"RETURNING {RUN_COLUMNS}"
                ),
                (status, error_text, d.to_time(utcnow()), run_id),
            )
            if row is not None:
                return self._run(row)
            row = await s.fetchone(d.sql(_RUN_BY_ID), (run_id,))
        if row is None:
            return None
        logger.warning(
            "finish_run(%s, %s) on thread %s ignored: the run already finished as %s",
            run_id,
            status,
            row[1],
            row[4],
        )
        return self._run(row)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run, or `None`."""
        validate_run_id(run_id)
        async with self._dialect.read("get_run", None) as s:
            row = await s.fetchone(self._dialect.sql(_RUN_BY_ID), (run_id,))
        return None if row is None else self._run(row)

    async def list_runs(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        order = "created_at DESC, run_id DESC"
        return await self._thread_page(RunRecord, "runs", order, thread_id, limit, offset)

    # thread leases ---------------------------------------------------------------------------

    def _lock(self, row: Row) -> ThreadLock:
        return from_row(ThreadLock, row, self._dialect.from_lease_time)

    async def acquire_thread_lease(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> ThreadLock | None:
        """Take the thread's lease if it is free or expired; `None` if someone holds it.

        Returns:
            The lease taken, with its fencing token (one more than the previous holder's).
        """
        holder_text, kind_text, ttl = check_lock_args(thread_id, holder, kind, ttl_seconds)
        async with self._dialect.write("acquire_thread_lock", thread_id) as s:
            await self._require_thread(s, thread_id)
            row = await s.fetchone(
                self._dialect.sql(_ACQUIRE), (thread_id, holder_text, kind_text, ttl)
            )
        return None if row is None else self._lock(row)

    async def acquire_thread_lock(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> bool:
        """Take the thread's lease if it is free or expired; `False` if someone holds it."""
        return await self.acquire_thread_lease(thread_id, holder, kind, ttl_seconds) is not None

    async def renew_thread_lock(
        self, thread_id: str, holder: str, ttl_seconds: float, *, token: int | None = None
    ) -> bool:
        """Extend the lease to now + ttl if `holder` still holds it (with `token`, if given).

        A queued run's holder is its run id in every worker that claims it: the token tells
        this worker's claim from the one that took the lapsed lease over. A lapsed lease is
        not renewed even if nobody took it: a reader has judged its run dead (`settle`).
        """
        holder_text, _, ttl = check_lock_args(thread_id, holder, None, ttl_seconds)
        where, args = _holder_match(thread_id, holder_text, token)
        query = self._dialect.sql(
            f"UPDATE {{p}}thread_locks SET expires_at = {{later}} {where} AND expires_at > {{now}}"
        )
        async with self._dialect.write("renew_thread_lock", thread_id) as s:
            return await s.execute(query, (ttl, *args)) > 0

    async def release_thread_lock(
        self, thread_id: str, holder: str, *, token: int | None = None
    ) -> bool:
        """Release the lease if `holder` holds it (with `token`, if given); `False` otherwise."""
        holder_text, _, _ = check_lock_args(thread_id, holder)
        where, args = _holder_match(thread_id, holder_text, token)
        # The row stays (expired, without a holder) so the next fencing token keeps counting up.
        query = self._dialect.sql(
            f"UPDATE {{p}}thread_locks SET holder = '', expires_at = acquired_at {where}"
        )
        async with self._dialect.write("release_thread_lock", thread_id) as s:
            return await s.execute(query, args) > 0

    async def get_thread_lock(self, thread_id: str) -> ThreadLock | None:
        """The live (unexpired) lease on the thread, or `None`."""
        tid = validate_thread_id(thread_id)
        query = self._dialect.sql(
            f"SELECT {LOCK_COLUMNS} FROM {{p}}thread_locks WHERE thread_id = ? "
            "AND expires_at > {now}"
        )
        async with self._dialect.read("get_thread_lock", tid) as s:
            row = await s.fetchone(query, (tid,))
        return None if row is None else self._lock(row)

    async def holds_thread_lock(self, thread_id: str, holder: str, token: int) -> bool:
        """Whether `holder` still holds the thread's live lease with fencing `token`."""
        holder_text, _, _ = check_lock_args(thread_id, holder)
        query = self._dialect.sql(LEASE_CHECK.replace("{share}", ""))
        async with self._dialect.read("holds_thread_lock", thread_id) as s:
            return await s.fetchone(query, (thread_id, holder_text, int(token))) is not None


GatewayStorage = SqlGatewayStorage
"""The storage contract the gateway codes against.

There is one implementation; a new database is a new `Dialect`, not a new storage class.
"""
