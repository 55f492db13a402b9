"""The memory write queue (outbox): what is queued, claimed and dead, and the rules of a claim.

A run (or a compaction) *enqueues* the conversation slice it wants remembered; a
`MemoryWorker` *claims* it later and applies it through `MemoryManager.remember`. The queue is
the only work on the answer's path, and it is durable on SQL (`SqlMemoryOutbox`, in the memory
database) so a crash at any point loses nothing. The rules, the same for every implementation:

- **Idempotent enqueue.** A slice's key is ``sha256(namespace, thread, first message id, last
  message id, origin)`` (`outbox_key`); enqueueing an existing key does nothing.
- **Per-thread debounce.** A row is due ``debounce_seconds`` after its enqueue. Rows of one
  debounce key (namespace × thread) are claimed together, and only once *all* of them are due
  (``max(due_at) <= now``): a burst of runs on a thread becomes one claim and one extraction.
- **Stable batches.** The rows claimed together form a batch whose key (`batch_key`: the row's
  own key, or a digest of the rows' keys) is fixed at the first claim: a batch released, failed
  or left by a crashed worker is claimed again with exactly the same rows, so the apply it
  retries is the same idempotent apply (`MemoryManager.remember(..., key=batch_key)`).
- **One batch per namespace at a time**, oldest first: two workers never apply two slices of
  one user concurrently (no lost supersession, no twin facts from a race), and a thread's
  slices apply in order (a retried batch blocks the newer rows of its thread).
- **Leases.** A claim holds its rows until ``lease_until``; an expired lease is claimable again.
- **Failure.** ``attempts`` + 1 and a retry after a backoff, or ``dead`` with the error kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from foldwise.errors import MemoryInputError
from foldwise.memory._backend_common import namespace_key
from foldwise.memory._facts import Namespace, check_namespace

__all__ = [
    "DeadLetter",
    "Enqueued",
    "MemoryOutbox",
    "OutboxBatch",
    "OutboxItem",
    "OutboxOrigin",
    "OutboxStatus",
    "QueueRow",
    "batch_key",
    "check_delay",
    "check_lease",
    "check_slice",
    "debounce_key",
    "decode_messages",
    "encode_messages",
    "outbox_key",
    "pick_batch",
]

OutboxOrigin = Literal["run", "compaction"]
RowStatus = Literal["pending", "claimed", "done", "dead"]
_ORIGINS = ("run", "compaction")
MAX_ERROR_CHARS = 2000


def check_lease(lease_seconds: object, limit: object) -> None:
    """`MemoryInputError` unless the lease is positive and the limit a positive integer."""
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int | float):
        raise MemoryInputError("must be a number of seconds", field="lease_seconds")
    if not lease_seconds > 0:
        raise MemoryInputError("must be positive", field="lease_seconds")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise MemoryInputError("must be a positive integer", field="limit")


def check_delay(value: object, field: str) -> float:
    """`value` as seconds, or `MemoryInputError` naming `field` (negative, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise MemoryInputError("must be a non-negative number of seconds", field=field)
    return float(value)


def outbox_key(
    namespace: Namespace, thread_id: str | None, first_id: str, last_id: str, origin: str
) -> str:
    """The idempotency key of a slice: the same slice enqueued twice is one row."""
    parts = [namespace_key(namespace), thread_id or "", first_id, last_id, origin]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def debounce_key(namespace: Namespace, thread_id: str | None) -> str:
    """Rows with the same debounce key (namespace × thread) are claimed together."""
    return json.dumps([namespace_key(namespace), thread_id or ""], separators=(",", ":"))


def batch_key(item_keys: Sequence[str]) -> str:
    """The idempotency key of a batch: its one row's key, else a digest of its rows' keys."""
    if len(item_keys) == 1:
        return item_keys[0]
    return hashlib.sha256("\x1f".join(item_keys).encode()).hexdigest()


def encode_messages(messages: Sequence[BaseMessage]) -> str:
    """The payload column: the messages as LangChain's dict form, in JSON."""
    return json.dumps(messages_to_dict(list(messages)), ensure_ascii=False)


def decode_messages(payload: str) -> list[BaseMessage]:
    """The messages `encode_messages` stored."""
    return messages_from_dict(json.loads(payload))


def check_slice(
    namespace: Namespace, messages: Sequence[BaseMessage], origin: str
) -> tuple[Namespace, list[BaseMessage]]:
    """Check an enqueue's arguments; `MemoryInputError` names the bad one."""
    ns = check_namespace(namespace)
    if origin not in _ORIGINS:
        raise MemoryInputError(f"must be one of {', '.join(_ORIGINS)}", field="origin")
    if isinstance(messages, BaseMessage | str) or not isinstance(messages, Sequence):
        raise MemoryInputError("must be a list of messages", field="messages")
    if not messages:
        raise MemoryInputError("must not be empty", field="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise MemoryInputError("must be a message", field=f"messages[{index}]")
        if not message.id:
            raise MemoryInputError("must have an id", field=f"messages[{index}].id")
    return ns, list(messages)


@dataclass(frozen=True)
class Enqueued:
    """What `MemoryOutbox.enqueue` did: the slice's key, and whether the row is new."""

    key: str
    created: bool


@dataclass(frozen=True)
class OutboxItem:
    """One queued slice (one outbox row)."""

    id: int
    key: str
    namespace: Namespace
    thread_id: str | None
    run_id: str | None
    trace_id: str | None
    origin: OutboxOrigin
    commit_ref: str | None
    payload: str
    attempts: int
    created_at: datetime

    def messages(self) -> list[BaseMessage]:
        """The slice's messages."""
        return decode_messages(self.payload)


@dataclass(frozen=True)
class OutboxBatch:
    """Rows of one debounce key claimed together under one lease."""

    key: str
    """The batch's idempotency key (`batch_key`), fixed at its first claim."""
    namespace: Namespace
    thread_id: str | None
    items: tuple[OutboxItem, ...]
    worker_id: str
    token: str
    lease_until: datetime

    @property
    def attempts(self) -> int:
        """Failed attempts so far (the most of its rows)."""
        return max(item.attempts for item in self.items)

    def messages(self, exclude: Sequence[int] = ()) -> list[BaseMessage]:
        """The rows' messages in order, each message id once (`exclude`: row ids to skip)."""
        seen: set[str] = set()
        merged: list[BaseMessage] = []
        for item in self.items:
            if item.id in exclude:
                continue
            for message in item.messages():
                if message.id not in seen:
                    seen.add(message.id or "")
                    merged.append(message)
        return merged


@dataclass(frozen=True)
class DeadLetter:
    """A slice given up after its last attempt, with the error that ended it."""

    key: str
    namespace: Namespace
    thread_id: str | None
    attempts: int
    error: str | None
    at: datetime | None


@dataclass(frozen=True)
class OutboxStatus:
    """The queue at a glance (``GET /memory/queue``)."""

    counts: dict[str, int]
    """Rows by status: ``pending``, ``claimed``, ``done``, ``dead``."""
    dead: list[DeadLetter] = field(default_factory=list)
    oldest_pending_seconds: float | None = None
    """Age of the oldest row not yet done (pending or claimed), `None` when there is none."""

    @property
    def live(self) -> int:
        """Rows still to apply (pending or claimed)."""
        return self.counts.get("pending", 0) + self.counts.get("claimed", 0)


@dataclass
class QueueRow:
    """A row as the claim rules see it (every implementation builds these)."""

    id: int
    debounce_key: str
    batch_key: str | None
    status: str
    due_at: datetime
    lease_until: datetime | None
    data: Any = None
    """The implementation's full row."""

    def leased(self, now: datetime) -> bool:
        """Claimed under a lease that has not expired."""
        return self.status == "claimed" and self.lease_until is not None and self.lease_until > now


MAX_DEFERRAL = timedelta(seconds=60)
"""A debounce key whose oldest row has been due this long is claimed even while its thread
keeps talking (a burst never defers memory for longer)."""


def pick_batch(rows: Sequence[QueueRow], now: datetime, due_by: datetime) -> list[QueueRow] | None:
    """The batch to claim among one namespace's live rows (in id order), or `None`.

    Nothing while any row of the namespace is leased. Else the first debounce key (oldest row
    first) whose head is due by `due_by`: its unfinished batch if it has one (exactly that
    batch's rows), else all its rows, which are due when every one of them is, or when the
    oldest has waited `MAX_DEFERRAL` past its own due time.
    """
    if any(row.leased(now) for row in rows):
        return None
    groups: dict[str, list[QueueRow]] = {}
    for row in rows:
        groups.setdefault(row.debounce_key, []).append(row)
    for group in groups.values():
        batched = [row for row in group if row.batch_key is not None]
        head = [row for row in batched if row.batch_key == batched[0].batch_key] or group
        if max(row.due_at for row in head) <= due_by:
            return head
        if min(row.due_at for row in head) + MAX_DEFERRAL <= due_by:
            return head
    return None


@runtime_checkable
class MemoryOutbox(Protocol):
    """The memory write queue; every method has an ``a``-prefixed async twin.

    `SqlMemoryOutbox` (durable, in the memory database) and `LocalMemoryOutbox` (in-process,
    for ``memory://`` and LangGraph-store backends: lost at exit) share the module's rules.
    """

    def setup(self) -> None: ...
    async def asetup(self) -> None: ...
    def close(self) -> None: ...
    async def aclose(self) -> None: ...

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
    ) -> Enqueued: ...
    async def aenqueue(
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
    ) -> Enqueued: ...

    def claim(
        self,
        worker_id: str,
        *,
        lease_seconds: float = 60.0,
        limit: int = 1,
        ignore_debounce: bool = False,
    ) -> list[OutboxBatch]: ...
    async def aclaim(
        self,
        worker_id: str,
        *,
        lease_seconds: float = 60.0,
        limit: int = 1,
        ignore_debounce: bool = False,
    ) -> list[OutboxBatch]: ...

    def complete(
        self, batch: OutboxBatch, *, discarded: Sequence[int] = (), reason: str | None = None
    ) -> int: ...
    async def acomplete(
        self, batch: OutboxBatch, *, discarded: Sequence[int] = (), reason: str | None = None
    ) -> int: ...

    def fail(self, batch: OutboxBatch, error: str, *, retry_in: float | None) -> int: ...
    async def afail(self, batch: OutboxBatch, error: str, *, retry_in: float | None) -> int: ...

    def release(self, batch: OutboxBatch, *, retry_in: float = 0.0) -> int: ...
    async def arelease(self, batch: OutboxBatch, *, retry_in: float = 0.0) -> int: ...

    def release_owned(self, worker_id: str) -> int: ...
    async def arelease_owned(self, worker_id: str) -> int: ...

    def status(
        self, *, dead_limit: int = 20, namespace_prefix: Namespace | None = None
    ) -> OutboxStatus: ...
    async def astatus(
        self, *, dead_limit: int = 20, namespace_prefix: Namespace | None = None
    ) -> OutboxStatus: ...
