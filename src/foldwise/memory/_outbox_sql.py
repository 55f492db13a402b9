"""`SqlMemoryOutbox`: the durable memory write queue, in the memory database (SQLite/PostgreSQL).

Rows live in ``memory_outbox`` (migration 2 of the memory ledger), next to the facts, in the
gateway's database by default. Like `SqlMemoryBackend`, it is sync DB-API code over a `Dialect`
whose async twins run it in a worker thread (`foldwise._steps.blocking_method`). A claim is
one write transaction:

- SQLite: ``BEGIN IMMEDIATE`` takes the database's writer lock, so the read of the live rows
  and the ``UPDATE … RETURNING`` that claims them are atomic against every other connection
  and process.
- PostgreSQL: the claim locks the namespace's row in ``memory_outbox_namespaces`` with
  ``FOR UPDATE SKIP LOCKED`` (a namespace another worker is claiming is skipped, not waited
  for), then reads the namespace's live rows in a fresh statement and re-checks the claim
  rules (`pick_batch`) before its ``UPDATE … RETURNING``. Two workers never claim one row, and
  never hold two batches of one namespace.

Complete, fail and release only touch rows still claimed under the caller's lease token: a
worker whose lease expired and was re-claimed changes nothing (the new holder's idempotent
apply makes the late one harmless).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise._steps import blocking_method
from foldwise.memory._backend_common import namespace_key
from foldwise.memory._facts import Namespace, utcnow
from foldwise.memory._outbox import (
    MAX_ERROR_CHARS,
    DeadLetter,
    Enqueued,
    OutboxBatch,
    OutboxItem,
    OutboxOrigin,
    OutboxStatus,
    QueueRow,
    batch_key,
    check_delay,
    check_lease,
    check_slice,
    debounce_key,
    encode_messages,
    outbox_key,
    pick_batch,
)
from foldwise.memory._sql_dialect import Dialect, Row, Session

__all__ = ["SqlMemoryOutbox"]

_COLUMNS = (
    "id, item_key, namespace, thread_id, run_id, trace_id, origin, commit_ref, payload, "
    "debounce_key, batch_key, due_at, status, attempts, lease_until, created_at"
)
_LIVE = "status IN ('pending', 'claimed')"
_CANDIDATES = (
    "SELECT namespace FROM {p}memory_outbox WHERE " + _LIVE + " GROUP BY namespace "
    "HAVING sum(CASE WHEN status = 'claimed' AND lease_until > ? THEN 1 ELSE 0 END) = 0 "
    "AND min(due_at) <= ? ORDER BY min(id) LIMIT ?"
)
_SCAN = 8


def _prefix_filter(prefix: Namespace | None) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause matching namespaces equal to or under `prefix` (all with `None`)."""
    if prefix is None:
        return "1 = 1", ()
    exact = namespace_key(prefix)
    under = exact[:-1].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ",%"
    return "(namespace = ? OR namespace LIKE ? ESCAPE '\\')", (exact, under)


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class SqlMemoryOutbox:
    """A `MemoryOutbox` in the memory SQL database (see the module docstring).

    Use `foldwise.memory.open_outbox` to build one from a URL; call `setup` before use.

    Args:
        dialect: The database (its own connection; the memory migrations create the table).
        clock: The current time (tests pass a controllable one).
    """

    def __init__(self, dialect: Dialect, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.dialect = dialect
        self.clock = clock

    def __repr__(self) -> str:
        return f"SqlMemoryOutbox({self.dialect!r})"

    def setup(self) -> None:
        """Connect and apply the memory migrations (idempotent)."""
        self.dialect.open()

    asetup = blocking_method(setup)

    def close(self) -> None:
        """Disconnect; safe to call twice."""
        self.dialect.close()

    aclose = blocking_method(close)

    def _t(self, moment: datetime) -> Any:
        return self.dialect.to_time(moment)

    def enqueue(
        self,
        namespace: Namespace,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        trace_id: str | None = None,
        origin: OutboxOrigin = "run",
        commit_ref: str | None = None,
        debounce_seconds: float = 0.0,
    ) -> Enqueued:
        """Queue a slice for memory; a slice already queued (same key) is left as it is."""
        ns, slice_ = check_slice(namespace, messages, origin)
        delay = check_delay(debounce_seconds, "debounce_seconds")
        key = outbox_key(ns, thread_id, slice_[0].id or "", slice_[-1].id or "", origin)
        now = self.clock()
        ns_key = namespace_key(ns)
        values = (
            key,
            ns_key,
            thread_id,
            run_id,
            trace_id,
            origin,
            commit_ref,
            encode_messages(slice_),
            debounce_key(ns, thread_id),
            self._t(now + timedelta(seconds=delay)),
            self._t(now),
        )
        with self.dialect.write() as session:
            session.execute(
                self.dialect.sql(
                    "INSERT INTO {p}memory_outbox_namespaces (namespace) VALUES (?) "
                    "ON CONFLICT DO NOTHING"
                ),
                (ns_key,),
            )
            row = session.fetchone(
                self.dialect.sql(
                    "INSERT INTO {p}memory_outbox (item_key, namespace, thread_id, run_id, "
                    "trace_id, origin, commit_ref, payload, debounce_key, due_at, status, "
                    "attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?) "
                    "ON CONFLICT (item_key) DO NOTHING RETURNING id"
                ),
                values,
            )
        return Enqueued(key=key, created=row is not None)

    aenqueue = blocking_method(enqueue)

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float = 60.0,
        limit: int = 1,
        ignore_debounce: bool = False,
    ) -> list[OutboxBatch]:
        """Lease up to `limit` batches (one per namespace) whose rows are due.

        Args:
            worker_id: Who holds the lease (shown in the queue status).
            lease_seconds: After this the batch is claimable again (its worker is presumed dead).
            limit: At most this many batches.
            ignore_debounce: Claim rows not yet due too (`MemoryWorker.flush`).
        """
        check_lease(lease_seconds, limit)
        now = self.clock()
        due_by = datetime.max.replace(tzinfo=now.tzinfo) if ignore_debounce else now
        until = now + timedelta(seconds=lease_seconds)
        batches: list[OutboxBatch] = []
        with self.dialect.write() as session:
            candidates = session.fetchall(
                self.dialect.sql(_CANDIDATES),
                (self._t(now), self._t(due_by), limit * _SCAN),
            )
            for (ns_key,) in candidates:
                if len(batches) >= limit:
                    break
                batch = self._claim_namespace(session, ns_key, worker_id, now, due_by, until)
                if batch is not None:
                    batches.append(batch)
        return batches

    aclaim = blocking_method(claim)

    def _claim_namespace(
        self,
        session: Session,
        ns_key: str,
        worker_id: str,
        now: datetime,
        due_by: datetime,
        until: datetime,
    ) -> OutboxBatch | None:
        locked = session.fetchone(
            self.dialect.sql(
                "SELECT namespace FROM {p}memory_outbox_namespaces WHERE namespace = ?"
            )
            + self.dialect.skip_locked,
            (ns_key,),
        )
        if locked is None:  # another worker is claiming in this namespace right now
            return None
        rows = session.fetchall(
            self.dialect.sql(
                f"SELECT {_COLUMNS} FROM {{p}}memory_outbox WHERE namespace = ? AND {_LIVE} "
                "ORDER BY id"
            ),
            (ns_key,),
        )
        head = pick_batch([self._queue_row(row) for row in rows], now, due_by)
        if head is None:
            return None
        key = head[0].batch_key or batch_key([row.data[1] for row in head])
        token = uuid.uuid4().hex
        ids = [row.id for row in head]
        claimed = session.fetchall(
            self.dialect.sql(
                "UPDATE {p}memory_outbox SET status = 'claimed', batch_key = ?, lease_owner = ?, "
                f"lease_token = ?, lease_until = ? WHERE id IN ({_marks(ids)}) AND {_LIVE} "
                f"RETURNING {_COLUMNS}"
            ),
            (key, worker_id, token, self._t(until), *ids),
        )
        items = tuple(sorted((self._item(row) for row in claimed), key=lambda item: item.id))
        first = items[0]
        return OutboxBatch(key, first.namespace, first.thread_id, items, worker_id, token, until)

    def _queue_row(self, row: Row) -> QueueRow:
        lease = row[14]
        return QueueRow(
            id=int(row[0]),
            debounce_key=row[9],
            batch_key=row[10],
            status=row[12],
            due_at=self.dialect.from_time(row[11]),
            lease_until=None if lease is None else self.dialect.from_time(lease),
            data=row,
        )

    def _item(self, row: Row) -> OutboxItem:
        return OutboxItem(
            id=int(row[0]),
            key=row[1],
            namespace=tuple(json.loads(row[2])),
            thread_id=row[3],
            run_id=row[4],
            trace_id=row[5],
            origin=row[6],
            commit_ref=row[7],
            payload=row[8],
            attempts=int(row[13]),
            created_at=self.dialect.from_time(row[15]),
        )

    def _update(
        self, batch: OutboxBatch, assignments: str, params: Sequence[Any], ids: Sequence[int]
    ) -> int:
        if not ids:
            return 0
        with self.dialect.write() as session:
            rows = session.fetchall(
                self.dialect.sql(
                    f"UPDATE {{p}}memory_outbox SET {assignments} WHERE batch_key = ? AND "
                    f"lease_token = ? AND status = 'claimed' AND id IN ({_marks(ids)}) RETURNING id"
                ),
                (*params, batch.key, batch.token, *ids),
            )
        return len(rows)

    def complete(
        self, batch: OutboxBatch, *, discarded: Sequence[int] = (), reason: str | None = None
    ) -> int:
        """Mark the batch done (`discarded` rows with `reason`); returns the rows changed.

        0 means the lease was lost (expired and re-claimed): the new holder finishes it.
        """
        now = self._t(self.clock())
        applied = [item.id for item in batch.items if item.id not in discarded]
        done = "status = 'done', done_at = ?, lease_until = NULL, last_error = ?"
        count = self._update(batch, done, (now, reason), list(discarded))
        return count + self._update(batch, done, (now, None), applied)

    acomplete = blocking_method(complete)

    def fail(self, batch: OutboxBatch, error: str, *, retry_in: float | None) -> int:
        """Count a failed attempt: retry after `retry_in` seconds, or (`None`) dead-letter it."""
        now = self.clock()
        text = str(error)[:MAX_ERROR_CHARS]
        ids = [item.id for item in batch.items]
        if retry_in is None:
            assignments = (
                "status = 'dead', attempts = attempts + 1, last_error = ?, done_at = ?, "
                "lease_until = NULL, lease_token = NULL"
            )
            return self._update(batch, assignments, (text, self._t(now)), ids)
        due = now + timedelta(seconds=check_delay(retry_in, "retry_in"))
        assignments = (
            "status = 'pending', attempts = attempts + 1, last_error = ?, due_at = ?, "
            "lease_until = NULL, lease_token = NULL"
        )
        return self._update(batch, assignments, (text, self._t(due)), ids)

    afail = blocking_method(fail)

    def release(self, batch: OutboxBatch, *, retry_in: float = 0.0) -> int:
        """Give the batch back unapplied (no attempt counted), claimable after `retry_in`."""
        due = self.clock() + timedelta(seconds=check_delay(retry_in, "retry_in"))
        assignments = "status = 'pending', due_at = ?, lease_until = NULL, lease_token = NULL"
        return self._update(batch, assignments, (self._t(due),), [i.id for i in batch.items])

    arelease = blocking_method(release)

    def release_owned(self, worker_id: str) -> int:
        """Release every batch leased to `worker_id` (a restarted worker's previous claims)."""
        with self.dialect.write() as session:
            rows = session.fetchall(
                self.dialect.sql(
                    "UPDATE {p}memory_outbox SET status = 'pending', lease_until = NULL, "
                    "lease_token = NULL WHERE status = 'claimed' AND lease_owner = ? RETURNING id"
                ),
                (worker_id,),
            )
        return len(rows)

    arelease_owned = blocking_method(release_owned)

    def status(
        self, *, dead_limit: int = 20, namespace_prefix: Namespace | None = None
    ) -> OutboxStatus:
        """Counts by status, the newest dead letters with their errors, the oldest live age.

        With `namespace_prefix`, only rows of namespaces under it count (one tenant's view).
        """
        where, params = _prefix_filter(namespace_prefix)
        with self.dialect.read() as session:
            counts = session.fetchall(
                self.dialect.sql(
                    f"SELECT status, count(*) FROM {{p}}memory_outbox WHERE {where} GROUP BY status"
                ),
                params,
            )
            oldest = session.fetchone(
                self.dialect.sql(
                    f"SELECT min(created_at) FROM {{p}}memory_outbox WHERE {_LIVE} AND {where}"
                ),
                params,
            )
            dead = session.fetchall(
                self.dialect.sql(
                    "SELECT item_key, namespace, thread_id, attempts, last_error, done_at "
                    f"FROM {{p}}memory_outbox WHERE status = 'dead' AND {where} "
                    "ORDER BY id DESC LIMIT ?"
                ),
                (*params, dead_limit),
            )
        age = None
        if oldest is not None and oldest[0] is not None:
            age = (self.clock() - self.dialect.from_time(oldest[0])).total_seconds()
        letters = [
            DeadLetter(
                key=row[0],
                namespace=tuple(json.loads(row[1])),
                thread_id=row[2],
                attempts=int(row[3]),
                error=row[4],
                at=None if row[5] is None else self.dialect.from_time(row[5]),
            )
            for row in dead
        ]
        return OutboxStatus(
            counts={str(s): int(n) for s, n in counts}, dead=letters, oldest_pending_seconds=age
        )

    astatus = blocking_method(status)
