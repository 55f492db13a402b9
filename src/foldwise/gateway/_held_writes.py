"""A run's task writes held in memory until their step's checkpoint commits them.

LangGraph saves a step's task writes (`aput_writes`) as each task ends, then the step's
checkpoint (`aput`): one transaction each, each with its own lease check and commit. The
gateway's savers (`FencedSqliteSaver`, `FencedPostgresSaver`) instead hold the writes made
under a `Lease` (a run's steps) here and commit them in the transaction of the thread's next
checkpoint: one transaction per step. What no checkpoint takes along (an interrupt's, an
error's) is committed on its own by `flush` (the gateway calls `flush_writes` when a run ends)
or by `settle` (the savers call it before every read of the thread, so a read sees them).

A commit that fails or is cancelled keeps the writes held, ahead of any held since (the next
checkpoint, or the run's end, commits them, as LangGraph's own saver would have). A lost lease
drops them: `flush` raises `LeaseLostError`, `settle` logs it. A crash before the commit loses
the step's writes and its checkpoint together: the step runs again, as after a crash during
the step.

The bookkeeping is shared; what a held write is (its payload) and how a batch commits are the
saver's: SQL and rows on SQLite, the `aput_writes` arguments replayed on a transaction-bound
saver on Postgres.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from foldwise._crash import crash_point
from foldwise.gateway._errors import LeaseLostError
from foldwise.gateway._leases import Lease

__all__ = ["HeldWrites", "flush_writes", "held_writes_of"]

logger = logging.getLogger(__name__)

P = TypeVar("P")

Held = tuple[Lease, P]
"""A held write: the lease it was made under, and the saver's payload."""


class HeldWrites(Generic[P]):
    """Task writes per thread, held until a checkpoint (or a flush) commits them.

    Args:
        commit: Commits payloads held under one lease in one transaction, checking the lease
            in it first (raising `LeaseLostError`, writing nothing, when it is lost).
    """

    def __init__(self, commit: Callable[[Lease, list[P]], Awaitable[None]]) -> None:
        self._commit = commit
        self._held: dict[str, list[Held[P]]] = {}
        self._flushing = asyncio.Lock()
        """One flush at a time: a flush returns only once writes an earlier one popped are
        committed (a run's end must not pass a read's flush still in flight)."""

    def threads(self) -> list[str]:
        """The threads with held writes."""
        return list(self._held)

    def hold(self, thread_id: str, lease: Lease, payload: P) -> None:
        """Hold a task's writes (made under `lease`) until the thread's next commit."""
        self._held.setdefault(thread_id, []).append((lease, payload))

    async def take(self, thread_id: str, lease: Lease | None) -> list[Held[P]]:
        """The held writes that commit with a checkpoint of `thread_id` written under `lease`.

        When writes under another lease are held (or any, for a checkpoint written without
        one), all are committed first, on their own, each under its own lease (`settle`). The
        caller commits what it takes, or gives it back with `keep` when its commit fails.
        """
        held = self._held.get(thread_id, [])
        if any(h[0] != lease for h in held):
            await self.settle(thread_id)
        held = self._held.pop(thread_id, [])
        taken = [h for h in held if h[0] == lease]
        self.keep(thread_id, [h for h in held if h[0] != lease])  # held during the settle
        return taken

    def keep(self, thread_id: str, held: list[Held[P]]) -> None:
        """Hold again writes whose commit failed, ahead of any held since."""
        if held:
            self._held[thread_id] = held + self._held.get(thread_id, [])

    def drop(self, thread_id: str) -> None:
        """Forget the thread's held writes (the thread is deleted)."""
        self._held.pop(thread_id, None)

    async def flush(self, thread_id: str) -> None:
        """Commit the thread's held writes now, one transaction per lease.

        Raises:
            LeaseLostError: A batch's lease was lost (that batch is dropped, never written;
                writes held under other leases stay held).
            Exception: The database error of a failed commit (the writes stay held).
        """
        async with self._flushing:
            await self._flush(thread_id)

    async def _flush(self, thread_id: str) -> None:
        held = self._held.pop(thread_id, [])
        while held:
            lease = held[0][0]
            batch = [h for h in held if h[0] == lease]
            held = [h for h in held if h[0] != lease]
            crash_point("writes.before")  # tests only
            try:
                await self._commit(lease, [payload for _, payload in batch])
            except LeaseLostError:
                self.keep(thread_id, held)
                raise
            except BaseException:
                self.keep(thread_id, batch + held)  # rolled back: the next flush retries
                raise
            crash_point("writes.after")  # tests only

    async def settle(self, thread_id: str) -> None:
        """Before a read: commit the thread's held writes (a lost lease drops them, logged).

        Raises:
            Exception: The database error of a failed commit (the writes stay held).
        """
        while thread_id in self._held:
            try:
                await self.flush(thread_id)
            except LeaseLostError:
                logger.warning("thread %s: held task writes dropped, lease lost", thread_id)

    async def settle_listed(self, config: Mapping[str, Any] | None) -> None:
        """Before a listing: settle its thread, or every thread with held writes."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        for thread in [str(thread_id)] if thread_id is not None else self.threads():
            await self.settle(thread)


def held_writes_of(checkpointer: Any) -> HeldWrites[Any] | None:
    """The `HeldWrites` of a gateway saver (`held_writes`); `None` for any other saver."""
    held = getattr(checkpointer, "held_writes", None)
    return held if isinstance(held, HeldWrites) else None


async def flush_writes(checkpointer: Any, thread_id: str) -> None:
    """Commit what `checkpointer` holds of the thread's task writes (a no-op for others).

    Raises:
        LeaseLostError: The writes' lease was lost (they are dropped, never written).
    """
    held = held_writes_of(checkpointer)
    if held is not None:
        await held.flush(thread_id)
