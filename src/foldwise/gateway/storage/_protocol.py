"""The storage contract of the gateway's own tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol, Self, runtime_checkable

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

__all__ = ["GatewayStorage", "ThreadSortKey"]

ThreadSortKey = Literal["created_at", "updated_at"]


@runtime_checkable
class GatewayStorage(Protocol):
    """Threads, runs, transcript events, compaction receipts and thread leases.

    Every method validates thread and run ids before any SQL (`InvalidThreadIdError`,
    `InvalidRunIdError`), and wraps database failures in `GatewayStorageError` (a
    `foldwise.errors.StorageError`). A missing row is `None` (or `False`) for lookups and
    `ThreadNotFoundError` where the operation needs the thread. Implementations:
    `SqliteGatewayStorage` and `PostgresGatewayStorage`; one test suite covers both.

    Use as ``async with open_storage(url) as storage: ...`` or call `setup` and `aclose`.
    """

    backend: str
    """``"sqlite"`` or ``"postgres"``."""

    async def setup(self) -> None:
        """Connect and apply pending numbered migrations (idempotent, safe to run concurrently)."""
        ...

    async def aclose(self) -> None:
        """Close every connection; safe to call twice."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def ping(self) -> None:
        """Run a trivial query; raise `GatewayStorageError` when the database is unusable."""
        ...

    async def schema_version(self) -> int:
        """Return the highest applied migration number (0 before `setup`)."""
        ...

    # threads ---------------------------------------------------------------------------------

    async def create_thread(
        self, thread_id: str, metadata: Mapping[str, Any] | None = None
    ) -> ThreadRecord:
        """Create an `idle` thread; raise `ThreadExistsError` when the id is taken."""
        ...

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread, or `None`."""
        ...

    async def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> ThreadRecord | None:
        """Shallow-merge `metadata` into the thread's and/or set `status`; `None` if missing."""
        ...

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete the thread with its runs, transcript, receipts and lock; `False` if missing."""
        ...

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
        ...

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
        ...

    async def finish_run(
        self, run_id: str, status: RunStatus, error: str | None = None
    ) -> RunRecord | None:
        """Finish a `running` run; a run already finished is returned unchanged."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Return the run, or `None`."""
        ...

    async def list_runs(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        ...

    # transcript ------------------------------------------------------------------------------

    async def append_transcript(
        self, thread_id: str, events: Sequence[TranscriptEvent]
    ) -> list[TranscriptEntry]:
        """Append events atomically with consecutive new `seq` numbers; skip known message ids.

        Returns:
            The entries actually stored (duplicates of stored message ids are left out).
        """
        ...

    async def list_transcript(
        self, thread_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[TranscriptEntry]:
        """Entries with `seq > after_seq`, ascending, at most `limit`."""
        ...

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
        ...

    async def list_receipts(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[ReceiptRecord]:
        """The thread's receipts, oldest first."""
        ...

    # thread leases ---------------------------------------------------------------------------

    async def acquire_thread_lock(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> bool:
        """Take the thread's lease if it is free or expired; `False` if someone holds it."""
        ...

    async def acquire_thread_lease(
        self, thread_id: str, holder: str, kind: str, ttl_seconds: float
    ) -> ThreadLock | None:
        """Like `acquire_thread_lock`, returning the lease taken (with its fencing token)."""
        ...

    async def holds_thread_lock(self, thread_id: str, holder: str, token: int) -> bool:
        """Whether `holder` still holds the thread's live lease with fencing `token`."""
        ...

    async def renew_thread_lock(self, thread_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend the lease to now + ttl if `holder` still holds it."""
        ...

    async def release_thread_lock(self, thread_id: str, holder: str) -> bool:
        """Release the lease if `holder` holds it; `False` otherwise."""
        ...

    async def get_thread_lock(self, thread_id: str) -> ThreadLock | None:
        """The live (unexpired) lease on the thread, or `None`."""
        ...
