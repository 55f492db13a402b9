"""`LocalMemoryOutbox`: the memory write queue in this process's memory (NOT durable).

For ``memory://`` and LangGraph-store backends, which have no SQL database to hold a durable
queue: the same interface and the same claim rules as `SqlMemoryOutbox` (`foldwise.memory.
_outbox`), kept in a dict under a lock. Everything queued and not yet applied is lost when the
process exits; use a SQL memory URL where that matters. Its async twins do the same in-memory
work inline (no I/O, nothing blocks the loop beyond the short lock).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from langchain_core.messages import BaseMessage

from foldwise._steps import inline_method
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

__all__ = ["LocalMemoryOutbox"]


_LIVE = ("pending", "claimed")


@dataclass
class _Row:
    item: OutboxItem
    debounce_key: str
    due_at: datetime
    status: str = "pending"
    batch_key: str | None = None
    lease_owner: str | None = None
    lease_token: str | None = None
    lease_until: datetime | None = None
    last_error: str | None = None
    done_at: datetime | None = None


class LocalMemoryOutbox:
    """An in-process `MemoryOutbox` (see the module docstring): lost at exit.

    Args:
        clock: The current time (tests pass a controllable one).
    """

    def __init__(self, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.clock = clock
        self._rows: dict[int, _Row] = {}
        self._keys: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "LocalMemoryOutbox()"

    def setup(self) -> None:
        """Nothing to set up."""

    asetup = inline_method(setup)

    def close(self) -> None:
        """Nothing to close (the queue stays readable)."""

    aclose = inline_method(close)

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
        """Queue a slice; a slice already queued (same key) is left as it is."""
        ns, slice_ = check_slice(namespace, messages, origin)
        delay = check_delay(debounce_seconds, "debounce_seconds")
        key = outbox_key(ns, thread_id, slice_[0].id or "", slice_[-1].id or "", origin)
        payload = encode_messages(slice_)
        now = self.clock()
        with self._lock:
            if key in self._keys:
                return Enqueued(key=key, created=False)
            row_id = len(self._rows) + 1
            item = OutboxItem(
                row_id, key, ns, thread_id, run_id, trace_id, origin, commit_ref, payload, 0, now
            )
            due = now + timedelta(seconds=delay)
            self._rows[row_id] = _Row(item, debounce_key(ns, thread_id), due)
            self._keys[key] = row_id
        return Enqueued(key=key, created=True)

    aenqueue = inline_method(enqueue)

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float = 60.0,
        limit: int = 1,
        ignore_debounce: bool = False,
    ) -> list[OutboxBatch]:
        """Lease up to `limit` due batches, one per namespace (`SqlMemoryOutbox.claim`)."""
        check_lease(lease_seconds, limit)
        now = self.clock()
        due_by = datetime.max.replace(tzinfo=now.tzinfo) if ignore_debounce else now
        until = now + timedelta(seconds=lease_seconds)
        batches: list[OutboxBatch] = []
        with self._lock:
            by_namespace: dict[tuple[str, ...], list[QueueRow]] = {}
            for row_id, row in sorted(self._rows.items()):
                if row.status in _LIVE:
                    by_namespace.setdefault(row.item.namespace, []).append(
                        QueueRow(
                            row_id, row.debounce_key, row.batch_key, row.status, row.due_at,
                            row.lease_until, row,
                        )
                    )  # fmt: skip
            for rows in by_namespace.values():
                if len(batches) >= limit:
                    break
                head = pick_batch(rows, now, due_by)
                if head is not None:
                    batches.append(self._lease([r.data for r in head], worker_id, until))
        return batches

    def _lease(self, rows: list[_Row], worker_id: str, until: datetime) -> OutboxBatch:
        key = rows[0].batch_key or batch_key([row.item.key for row in rows])
        token = uuid.uuid4().hex
        for row in rows:
            row.status, row.batch_key, row.lease_owner = "claimed", key, worker_id
            row.lease_token, row.lease_until = token, until
        items = tuple(row.item for row in rows)
        return OutboxBatch(
            key, items[0].namespace, items[0].thread_id, items, worker_id, token, until
        )

    aclaim = inline_method(claim)

    def _held(self, batch: OutboxBatch, ids: Sequence[int]) -> list[_Row]:
        rows = [self._rows.get(i) for i in ids]
        return [
            row
            for row in rows
            if row is not None
            and row.status == "claimed"
            and row.batch_key == batch.key
            and row.lease_token == batch.token
        ]

    def complete(
        self, batch: OutboxBatch, *, discarded: Sequence[int] = (), reason: str | None = None
    ) -> int:
        """Mark the batch done (`discarded` rows with `reason`); 0 when the lease was lost."""
        now = self.clock()
        with self._lock:
            rows = self._held(batch, [item.id for item in batch.items])
            for row in rows:
                row.status, row.done_at, row.lease_until = "done", now, None
                row.last_error = reason if row.item.id in discarded else None
        return len(rows)

    acomplete = inline_method(complete)

    def fail(self, batch: OutboxBatch, error: str, *, retry_in: float | None) -> int:
        """Count a failed attempt: retry after `retry_in` seconds, or (`None`) dead-letter it."""
        now = self.clock()
        delay = None if retry_in is None else check_delay(retry_in, "retry_in")
        due = None if delay is None else now + timedelta(seconds=delay)
        with self._lock:
            rows = self._held(batch, [item.id for item in batch.items])
            for row in rows:
                row.item = replace(row.item, attempts=row.item.attempts + 1)
                row.last_error = str(error)[:MAX_ERROR_CHARS]
                row.lease_token = row.lease_until = None
                if due is None:
                    row.status, row.done_at = "dead", now
                else:
                    row.status, row.due_at = "pending", due
        return len(rows)

    afail = inline_method(fail)

    def release(self, batch: OutboxBatch, *, retry_in: float = 0.0) -> int:
        """Give the batch back unapplied (no attempt counted), claimable after `retry_in`."""
        due = self.clock() + timedelta(seconds=check_delay(retry_in, "retry_in"))
        with self._lock:
            rows = self._held(batch, [item.id for item in batch.items])
            for row in rows:
                row.status, row.due_at = "pending", due
                row.lease_token = row.lease_until = None
        return len(rows)

    arelease = inline_method(release)

    def release_owned(self, worker_id: str) -> int:
        """Release every batch leased to `worker_id`."""
        with self._lock:
            rows = [r for r in self._rows.values() if r.status == "claimed"]
            rows = [r for r in rows if r.lease_owner == worker_id]
            for row in rows:
                row.status, row.lease_token, row.lease_until = "pending", None, None
        return len(rows)

    arelease_owned = inline_method(release_owned)

    def status(
        self, *, dead_limit: int = 20, namespace_prefix: Namespace | None = None
    ) -> OutboxStatus:
        """Counts by status, the newest dead letters with their errors, the oldest live age.

        With `namespace_prefix`, only rows of namespaces under it count (one tenant's view).
        """
        now = self.clock()
        with self._lock:
            rows = list(self._rows.values())
        if namespace_prefix is not None:
            size = len(namespace_prefix)
            rows = [r for r in rows if tuple(r.item.namespace[:size]) == tuple(namespace_prefix)]
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        live = [row.item.created_at for row in rows if row.status in _LIVE]
        dead = [row for row in reversed(rows) if row.status == "dead"][:dead_limit]
        return OutboxStatus(
            counts=counts,
            dead=[
                DeadLetter(
                    r.item.key,
                    r.item.namespace,
                    r.item.thread_id,
                    r.item.attempts,
                    r.last_error,
                    r.done_at,
                )
                for r in dead
            ],
            oldest_pending_seconds=(now - min(live)).total_seconds() if live else None,
        )

    astatus = inline_method(status)
