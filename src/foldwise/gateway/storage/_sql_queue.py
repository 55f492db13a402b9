"""The run-queue half of `SqlGatewayStorage`: pending runs and the requests they carry.

A run accepted while its thread is busy is stored `pending`, with its request (a JSON object
the gateway can rebuild the run from) in `run_queue`. A worker claims it by taking the thread's
lease with the run id as holder (the lease is the mutual exclusion: one holder per thread, on
both databases), checking that it is the thread's oldest pending run, and moving it to
`running` with `start_pending_run`, a conditional update that a concurrent cancel can win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from foldwise.gateway.storage._base import RUN_COLUMNS, check_run_args, encode_metadata, from_row
from foldwise.gateway.storage._codec import check_page, loads_object, utcnow
from foldwise.gateway.storage._errors import RunExistsError
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._records import RunRecord
from foldwise.gateway.storage._sql_events import SqlEventsMixin

__all__ = ["SqlQueueMixin"]

_PENDING = "status = 'pending'"
_OLDEST = "ORDER BY created_at, run_id"


class SqlQueueMixin(SqlEventsMixin):
    """Run-queue methods of `SqlGatewayStorage` (see there)."""

    async def enqueue_run(
        self,
        thread_id: str,
        run_id: str,
        assistant_id: str,
        request: Mapping[str, Any],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Record a `pending` run and the request to start it from, in one transaction.

        Raises:
            ThreadNotFoundError: No such thread.
            RunExistsError: The run id is taken.
        """
        assistant = check_run_args(thread_id, run_id, assistant_id, "run")
        meta = encode_metadata(metadata)
        body = encode_metadata(request)
        d = self._dialect
        now = d.to_time(utcnow())
        async with d.write("enqueue_run", thread_id) as s:
            await self._require_thread(s, thread_id)
            row = await s.fetchone(
                d.sql(
                    f"INSERT INTO {{p}}runs ({RUN_COLUMNS}) "
                    "VALUES (?, ?, ?, 'run', 'pending', NULL, {json}, ?, ?) "
                    f"ON CONFLICT (run_id) DO NOTHING RETURNING {RUN_COLUMNS}"
                ),
                (run_id, thread_id, assistant, meta, now, now),
            )
            if row is None:
                raise RunExistsError(run_id)
            await s.execute(
                d.sql("INSERT INTO {p}run_queue (run_id, request) VALUES (?, {json})"),
                (run_id, body),
            )
        return from_row(RunRecord, row, d.from_time)

    async def pending_runs(self, *, limit: int = 100) -> list[RunRecord]:
        """The next pending run of every thread no one holds, oldest first (at most `limit`).

        One row per thread (its oldest pending run) and none of a thread whose lease is live,
        so a long queue on one thread, or threads busy in other workers, cannot fill the page
        and starve the other threads' queues.
        """
        check_page(limit, 0)
        d = self._dialect
        query = (
            f"SELECT {RUN_COLUMNS} FROM {{p}}runs r WHERE {_PENDING} "
            "AND NOT EXISTS (SELECT 1 FROM {p}runs o WHERE o.thread_id = r.thread_id "
            "AND o.status = 'pending' AND (o.created_at < r.created_at "
            "OR (o.created_at = r.created_at AND o.run_id < r.run_id))) "
            "AND NOT EXISTS (SELECT 1 FROM {p}thread_locks l "
            "WHERE l.thread_id = r.thread_id AND l.expires_at > {now}) "
            f"{_OLDEST} LIMIT ?"
        )
        async with d.read("pending_runs", None) as s:
            rows = await s.fetchall(d.sql(query), (limit,))
        return [from_row(RunRecord, row, d.from_time) for row in rows]

    async def queue_stats(self) -> tuple[int, datetime | None]:
        """How many runs are pending in all, and when the oldest was queued (`None`: none)."""
        d = self._dialect
        query = f"SELECT count(*), min(created_at) FROM {{p}}runs WHERE {_PENDING}"
        async with d.read("queue_stats", None) as s:
            row = await s.fetchone(d.sql(query))
        if row is None or not row[0]:
            return 0, None
        return int(row[0]), d.from_time(row[1])

    async def thread_pending_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's pending runs, oldest first (the order they will start in)."""
        tid = validate_thread_id(thread_id)
        d = self._dialect
        query = f"SELECT {RUN_COLUMNS} FROM {{p}}runs WHERE thread_id = ? AND {_PENDING} {_OLDEST}"
        async with d.read("thread_pending_runs", tid) as s:
            rows = await s.fetchall(d.sql(query), (tid,))
        return [from_row(RunRecord, row, d.from_time) for row in rows]

    async def queued_request(self, run_id: str) -> dict[str, Any] | None:
        """The request a pending run was accepted with, or `None`."""
        validate_run_id(run_id)
        d = self._dialect
        async with d.read("queued_request", None) as s:
            row = await s.fetchone(
                d.sql("SELECT request FROM {p}run_queue WHERE run_id = ?"), (run_id,)
            )
        return None if row is None else loads_object(row[0])

    async def _leave_pending(
        self, operation: str, run_id: str, status: str, error: str | None
    ) -> bool:
        """Move a run out of `pending` (and drop its request) if it still is; else `False`."""
        validate_run_id(run_id)
        d = self._dialect
        async with d.write(operation, None) as s:
            changed = await s.execute(
                d.sql(
                    "UPDATE {p}runs SET status = ?, error = ?, updated_at = ? "
                    f"WHERE run_id = ? AND {_PENDING}"
                ),
                (status, error, d.to_time(utcnow()), run_id),
            )
            if changed:
                await s.execute(d.sql("DELETE FROM {p}run_queue WHERE run_id = ?"), (run_id,))
        return changed > 0

    async def start_pending_run(self, run_id: str) -> bool:
        """Move a `pending` run to `running`; `False` if it is no longer pending (cancelled)."""
        return await self._leave_pending("start_pending_run", run_id, "running", None)

    async def delete_run(self, run_id: str, *, thread_id: str, pending_only: bool = False) -> bool:
        """Delete a run of the thread (a rolled-back run disappears); `False` if missing.

        With `pending_only`, only while it is `pending` (a run that started is left alone).
        """
        validate_run_id(run_id)
        tid = validate_thread_id(thread_id)
        d = self._dialect
        query = "DELETE FROM {p}runs WHERE run_id = ? AND thread_id = ?"
        if pending_only:
            query += f" AND {_PENDING}"
        async with d.write("delete_run", tid) as s:
            return await s.execute(d.sql(query), (run_id, tid)) > 0

    async def fail_pending_run(self, run_id: str, error: str) -> bool:
        """Finish a run `error` if it is still `pending` (it could not start); else `False`.

        A claimant that stalled past its lease must not end the run: the worker that took the
        lapsed lease over may be running it.
        """
        return await self._leave_pending("fail_pending_run", run_id, "error", error)

    async def cancel_pending_run(self, run_id: str, error: str) -> bool:
        """Finish a run `interrupted` if it is still `pending`; `False` if it is not."""
        return await self._leave_pending("cancel_pending_run", run_id, "interrupted", error)

    # -- cancelling a run that executes in another worker ----------------------------------------

    async def request_cancel(self, run_id: str, action: str) -> bool:
        """Ask the worker executing the run to stop it (`interrupt` or `rollback`).

        Returns `False` when the run is not `running` (nothing to ask). A second request for
        the same run keeps the first one's action. The requests of runs that ended before
        their worker read them are dropped here (else they would stay until the run is).
        """
        validate_run_id(run_id)
        if action not in ("interrupt", "rollback"):
            raise ValueError(f"action: 'interrupt' or 'rollback', got {action!r}")
        d = self._dialect
        async with d.write("request_cancel", None) as s:
            await s.execute(
                d.sql(
                    "DELETE FROM {p}run_cancels WHERE run_id NOT IN "
                    "(SELECT run_id FROM {p}runs WHERE status = 'running')"
                )
            )
            changed = await s.execute(
                d.sql(
                    "INSERT INTO {p}run_cancels (run_id, action, requested_at) "
                    "SELECT run_id, ?, ? FROM {p}runs WHERE run_id = ? AND status = 'running' "
                    "ON CONFLICT (run_id) DO NOTHING"
                ),
                (action, d.to_time(utcnow()), run_id),
            )
            if changed:
                return True
            row = await s.fetchone(
                d.sql("SELECT 1 FROM {p}run_cancels WHERE run_id = ?"), (run_id,)
            )
        return row is not None

    async def take_cancel_requests(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The cancel requests for these runs (run id → action), removed as they are read.

        A worker asks with the runs it executes, about once a second; the read alone touches
        no row when nobody asked (the usual case).
        """
        ids = [validate_run_id(run_id) for run_id in run_ids]
        if not ids:
            return {}
        d = self._dialect
        marks = ", ".join("?" for _ in ids)
        async with d.read("cancel_requests", None) as s:
            rows = await s.fetchall(
                d.sql(f"SELECT run_id, action FROM {{p}}run_cancels WHERE run_id IN ({marks})"),
                ids,
            )
        if not rows:
            return {}
        found = {str(run_id): str(action) for run_id, action in rows}
        marks = ", ".join("?" for _ in found)
        async with d.write("take_cancel_requests", None) as s:
            await s.execute(
                d.sql(f"DELETE FROM {{p}}run_cancels WHERE run_id IN ({marks})"), list(found)
            )
        return found
