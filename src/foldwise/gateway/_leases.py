"""One run or compaction per thread, across processes: the storage lease, renewed while held.

Every operation that writes a thread (a run, a compaction, a deletion) takes the thread's lease
in `thread_locks` with a holder unique to the operation (a queued run's is its run id in every
worker that claims it: renewals and releases also name the acquisition's fencing token), renews
it every `ttl / 3` seconds while it works, and releases it when it ends, whatever the outcome.
A second operation gets `BusyError` (409 with `Retry-After`). When a renewal finds the lease
lapsed (this worker stalled past the TTL), taken over or not, the operation is stopped.

Leases also fence writes. Every acquisition gets a fencing token (one more than the thread's
previous one); the operation's LangGraph config carries its `Lease` under `LEASE_KEY`, and the
gateway's checkpointer commits a checkpoint only if, in the same transaction, the lease row
still names this holder and token and has not expired (`foldwise.gateway._checkpointer`). A
worker that stalled past the TTL therefore cannot overwrite the state of the worker that took
the thread over: its write fails with `LeaseLostError` and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from foldwise._crash import crash_point
from foldwise._telemetry import timed
from foldwise.errors import StorageError
from foldwise.gateway._errors import BusyError, LeaseLostError
from foldwise.gateway.storage import GatewayStorage

__all__ = ["DEFAULT_LEASE_TTL", "LEASE_KEY", "Lease", "ThreadLeases", "lease_of"]

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL = 30.0
"""Seconds a lease lasts without renewal; the holder renews every third of it."""
_RETRY_AFTER_CAP = 5
_WHAT = {"run": "a run", "compact": "a compaction", "delete": "a deletion"}

LEASE_KEY = "__foldwise_lease__"
"""The `configurable` key of a run config that carries the operation's `Lease`.

LangGraph passes `configurable` to every checkpointer write and leaves ``__``-prefixed keys
out of checkpoint metadata.
"""


@dataclass(frozen=True, slots=True)
class Lease:
    """A held thread lease: who holds it and its fencing token.

    Attributes:
        thread_id: The leased thread.
        holder: The operation holding it (its run id).
        token: The fencing token of this acquisition.
        storage: The gateway storage holding the lease row (for `verify`).
    """

    thread_id: str
    holder: str
    token: int
    storage: GatewayStorage = field(repr=False, compare=False)
    _watchers: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    def watch(self, on_lost: Callable[[], None]) -> None:
        """Call `on_lost` at the first refused write under this lease (the lease was lost)."""
        self._watchers.append(on_lost)

    def forget_watchers(self) -> None:
        """Drop every watcher: the lease is released and nothing more is written under it.

        A watcher usually closes over its operation, which holds this lease: dropping them
        breaks that cycle, so a finished run's state is freed at once instead of waiting for
        a full garbage collection.
        """
        self._watchers.clear()

    def refuse(self) -> LeaseLostError:
        """Log a refused write, tell the watchers, and return the error to raise."""
        logger.error(
            "thread %s: write refused, the lease of %s (token %d) was lost",
            self.thread_id,
            self.holder,
            self.token,
        )
        # Once: later refusals (other writes in flight) must not cancel the operation's cleanup.
        watchers = list(self._watchers)
        self._watchers.clear()
        for on_lost in watchers:
            on_lost()
        return LeaseLostError(self.thread_id)

    async def verify(self) -> None:
        """Raise `LeaseLostError` unless the lease is still this holder's, live, same token."""
        if not await self.storage.holds_thread_lock(self.thread_id, self.holder, self.token):
            raise self.refuse()


def lease_of(config: Any) -> Lease | None:
    """The `Lease` a LangGraph config carries under `LEASE_KEY`, if any."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    lease = (configurable or {}).get(LEASE_KEY)
    return lease if isinstance(lease, Lease) else None


class ThreadLeases:
    """Acquire, renew and release thread leases in the gateway storage.

    Args:
        storage: The gateway storage.
        ttl: Seconds a lease lasts without renewal.
    """

    def __init__(self, storage: GatewayStorage, *, ttl: float = DEFAULT_LEASE_TTL) -> None:
        if ttl <= 0:
            raise ValueError("the lease TTL must be positive")
        self.storage = storage
        self.ttl = ttl
        self._held: dict[tuple[str, str], Lease] = {}

    async def acquire(self, thread_id: str, holder: str, kind: str) -> Lease:
        """Take the thread's lease for `holder`.

        Returns:
            The lease, with its fencing token.

        Raises:
            BusyError: Another operation holds it (409, with a `Retry-After` hint).
            ThreadNotFoundError: The thread does not exist.
        """
        # OpenTelemetry: `foldwise.lease.wait` (a refusal records `error.type: BusyError`).
        with timed("foldwise.lease.wait", {"foldwise.lease.kind": kind}):
            crash_point("lease.acquire.before")  # tests only
            taken = await self.storage.acquire_thread_lease(thread_id, holder, kind, self.ttl)
            if taken is not None:
                crash_point("lease.acquire.after")  # tests only
                lease = Lease(thread_id, holder, taken.token, self.storage)
                self._held[(thread_id, holder)] = lease
                return lease
            lock = await self.storage.get_thread_lock(thread_id)
            retry_after = 1
            what = "another operation"
            if lock is not None:
                remaining = (lock.expires_at - datetime.now(UTC)).total_seconds()
                retry_after = max(1, min(_RETRY_AFTER_CAP, math.ceil(remaining)))
                what = _WHAT.get(lock.kind, f"a {lock.kind}")
            raise BusyError(thread_id, what, retry_after)

    async def release(self, thread_id: str, holder: str) -> None:
        """Release the lease if `holder` still holds it; failures are logged, never raised.

        Only this acquisition's (its fencing token): a queued run's holder is its run id in
        every worker, and another worker may have taken the lapsed lease over for that run.
        """
        lease = self._held.pop((thread_id, holder), None)
        token = None
        if lease is not None:
            token = lease.token
            lease.forget_watchers()
        try:
            crash_point("lease.release.before")  # tests only
            await self.storage.release_thread_lock(thread_id, holder, token=token)
            crash_point("lease.release.after")  # tests only
        except StorageError:
            logger.exception(
                "could not release the lease of thread %s (holder %s); it expires on its own",
                thread_id,
                holder,
            )

    def held(self, thread_id: str, holder: str) -> Lease | None:
        """The lease `holder` took here on the thread and has not released, if any."""
        return self._held.get((thread_id, holder))

    def fence(self, thread_id: str, holder: str) -> dict[str, Any]:
        """The `configurable` entries that fence a LangGraph write with `holder`'s lease.

        Returns:
            ``{LEASE_KEY: lease}`` while `holder` holds the lease it took here, else ``{}``.
        """
        lease = self._held.get((thread_id, holder))
        return {} if lease is None else {LEASE_KEY: lease}

    def watch(self, thread_id: str, holder: str, on_lost: Callable[[], None]) -> None:
        """Call `on_lost` when a fenced write under `holder`'s lease is refused."""
        lease = self._held.get((thread_id, holder))
        if lease is not None:
            lease.watch(on_lost)

    async def keep_alive(self, thread_id: str, holder: str, on_lost: Callable[[], None]) -> None:
        """Renew the lease every `ttl / 3` seconds until cancelled; call `on_lost` if it is lost.

        The lease counts as lost when a renewal finds it lapsed or someone else's, or when
        renewals have failed (database errors) for longer than the TTL.
        """
        interval = self.ttl / 3
        last_ok = time.monotonic()
        lease = self._held.get((thread_id, holder))
        token = None if lease is None else lease.token
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await self.storage.renew_thread_lock(
                    thread_id, holder, self.ttl, token=token
                )
            except StorageError as error:
                logger.warning("lease renewal failed for thread %s: %s", thread_id, error)
                if time.monotonic() - last_ok < self.ttl:
                    continue
                renewed = False
            if renewed:
                last_ok = time.monotonic()
                continue
            logger.error(
                "thread %s: lease of %s was lost (taken over or expired); stopping it",
                thread_id,
                holder,
            )
            on_lost()
            return
