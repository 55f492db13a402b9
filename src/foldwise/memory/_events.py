"""The memory decision log: one `MemoryEvent` per decision, kept for ``foldwise memory log``.

`MemoryManager` hands every decision of a write (added, superseded, retracted, reinforced,
quarantined, rejected by the gate, deduplicated, nothing to remember) to its event sink right
after the backend write succeeded (a separate transaction: a crash between the two loses those
log rows, never a fact; the replay then logs ``deduplicated``). On SQL the sink is the
``memory_events`` table of the memory database (`SqlMemoryEvents`, sharing the backend's
connection); on other backends a bounded in-process list (`LocalMemoryEvents`, lost at exit).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from foldwise._steps import blocking_method
from foldwise.errors import MemoryInputError
from foldwise.memory._backend_common import namespace_key
from foldwise.memory._contracts import MemoryBackend
from foldwise.memory._facts import (
    DecisionAction,
    FactSource,
    MemoryDecision,
    Namespace,
    Slot,
    check_namespace,
)
from foldwise.memory._sql_backend import SqlMemoryBackend
from foldwise.memory._sql_dialect import Dialect

__all__ = [
    "LocalMemoryEvents",
    "MemoryEvent",
    "MemoryEventSink",
    "SqlMemoryEvents",
    "check_limit",
    "default_sink",
    "events_of",
]

MAX_EVENTS_LIMIT = 1000
_LOCAL_KEEP = 10_000


class MemoryEvent(BaseModel):
    """One memory decision, when it was applied, and where its evidence came from."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    namespace: Namespace
    action: DecisionAction
    reason: str | None = None
    slot: Slot | None = None
    text: str = ""
    fact_id: str | None = None
    closed_ids: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    """Ids of the messages that state it."""
    key: str | None = None
    """The write queue's idempotency key of the slice (`None`: a direct call)."""
    thread_id: str | None = None
    run_id: str | None = None
    via: str = "api"


def events_of(
    namespace: Namespace,
    decisions: Sequence[MemoryDecision],
    *,
    at: datetime,
    source: FactSource,
    key: str | None,
) -> list[MemoryEvent]:
    """The log rows of `decisions`."""
    return [
        MemoryEvent(
            at=at,
            namespace=namespace,
            action=d.action,
            reason=d.reason,
            slot=d.slot,
            text=d.text,
            fact_id=d.fact_id,
            closed_ids=d.closed_ids,
            evidence=d.evidence,
            key=key,
            thread_id=source.thread_id,
            run_id=source.run_id,
            via=source.via,
        )
        for d in decisions
    ]


def check_limit(limit: object) -> int:
    """`limit` if it is an integer from 1 to 1000, else `MemoryInputError`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_EVENTS_LIMIT:
        raise MemoryInputError(f"must be an integer from 1 to {MAX_EVENTS_LIMIT}", field="limit")
    return limit


@runtime_checkable
class MemoryEventSink(Protocol):
    """Where decisions are logged; newest first when read."""

    def record(self, events: Sequence[MemoryEvent]) -> None: ...
    async def arecord(self, events: Sequence[MemoryEvent]) -> None: ...
    def list_events(self, namespace: Namespace, *, limit: int = 50) -> list[MemoryEvent]: ...
    async def alist_events(self, namespace: Namespace, *, limit: int = 50) -> list[MemoryEvent]: ...


class SqlMemoryEvents:
    """The ``memory_events`` table, over the memory backend's own `Dialect` (its connection).

    Opened and closed with the backend (`SqlMemoryBackend.setup` runs the migrations).
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def record(self, events: Sequence[MemoryEvent]) -> None:
        """Append `events` in one transaction."""
        if not events:
            return
        with self.dialect.write() as session:
            for event in events:
                session.execute(
                    self.dialect.sql(
                        "INSERT INTO {p}memory_events (namespace, item_key, action, fact_id, at, "
                        "body) VALUES (?, ?, ?, ?, ?, ?)"
                    ),
                    (
                        namespace_key(event.namespace),
                        event.key,
                        event.action,
                        event.fact_id,
                        self.dialect.to_time(event.at),
                        event.model_dump_json(),
                    ),
                )

    arecord = blocking_method(record)

    def list_events(self, namespace: Namespace, *, limit: int = 50) -> list[MemoryEvent]:
        """The namespace's newest `limit` events, newest first."""
        key = namespace_key(check_namespace(namespace))
        with self.dialect.read() as session:
            rows = session.fetchall(
                self.dialect.sql(
                    "SELECT body FROM {p}memory_events WHERE namespace = ? ORDER BY seq DESC "
                    "LIMIT ?"
                ),
                (key, check_limit(limit)),
            )
        return [MemoryEvent.model_validate_json(row[0]) for row in rows]

    alist_events = blocking_method(list_events)


class LocalMemoryEvents:
    """The last 10,000 events in this process (not durable), for non-SQL backends."""

    def __init__(self) -> None:
        self._events: deque[MemoryEvent] = deque(maxlen=_LOCAL_KEEP)
        self._lock = threading.Lock()

    def record(self, events: Sequence[MemoryEvent]) -> None:
        """Append `events`."""
        with self._lock:
            self._events.extend(events)

    async def arecord(self, events: Sequence[MemoryEvent]) -> None:
        """Async `record` (in-memory, inline)."""
        self.record(events)

    def list_events(self, namespace: Namespace, *, limit: int = 50) -> list[MemoryEvent]:
        """The namespace's newest `limit` events, newest first."""
        ns, limit = check_namespace(namespace), check_limit(limit)
        with self._lock:
            mine = [e for e in reversed(self._events) if e.namespace == ns]
        return mine[:limit]

    async def alist_events(self, namespace: Namespace, *, limit: int = 50) -> list[MemoryEvent]:
        """Async `list_events`."""
        return self.list_events(namespace, limit=limit)


def default_sink(backend: MemoryBackend) -> MemoryEventSink:
    """The log next to `backend`'s facts: ``memory_events`` on SQL, else in this process."""
    if isinstance(backend, SqlMemoryBackend):
        return SqlMemoryEvents(backend.dialect)
    return LocalMemoryEvents()
