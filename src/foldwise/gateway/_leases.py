"""One run or compaction per thread, across processes: the storage lease, renewed while held.

Every operation that writes a thread (a run, a compaction, a deletion) takes the thread's lease
in `thread_locks` with a holder unique to the operation, renews it every `ttl / 3` seconds while
it works, and releases it when it ends, whatever the outcome. A second operation gets
`BusyError` (409 with `Retry-After`). When a renewal finds that another holder took the lease
over (this worker stalled past the TTL), the operation is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from foldwise.errors import StorageError
from foldwise.gateway._errors import BusyError
from foldwise.gateway.storage import GatewayStorage

__all__ = ["DEFAULT_LEASE_TTL", "ThreadLeases"]

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL = 30.0
"""Seconds a lease lasts without renewal; the holder renews every third of it."""
_RETRY_AFTER_CAP = 5
_WHAT = {"run": "a run", "compact": "a compaction", "delete": "a deletion"}


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

    async def acquire(self, thread_id: str, holder: str, kind: str) -> None:
        """Take the thread's lease for `holder`.

        Raises:
            BusyError: Another operation holds it (409, with a `Retry-After` hint).
            ThreadNotFoundError: The thread does not exist.
        """
        if await self.storage.acquire_thread_lock(thread_id, holder, kind, self.ttl):
            return
        lock = await self.storage.get_thread_lock(thread_id)
        retry_after = 1
        what = "another operation"
        if lock is not None:
            remaining = (lock.expires_at - datetime.now(UTC)).total_seconds()
            retry_after = max(1, min(_RETRY_AFTER_CAP, math.ceil(remaining)))
            what = _WHAT.get(lock.kind, f"a {lock.kind}")
        raise BusyError(thread_id, what, retry_after)

    async def release(self, thread_id: str, holder: str) -> None:
        """Release the lease if `holder` still holds it; failures are logged, never raised."""
        try:
            await self.storage.release_thread_lock(thread_id, holder)
        except StorageError:
            logger.exception(
                "could not release the lease of thread %s (holder %s); it expires on its own",
                thread_id,
                holder,
            )

    async def keep_alive(self, thread_id: str, holder: str, on_lost: Callable[[], None]) -> None:
        """Renew the lease every `ttl / 3` seconds until cancelled; call `on_lost` if it is lost.

        The lease counts as lost when a renewal says someone else holds it, or when renewals
        have failed (database errors) for longer than the TTL.
        """
        interval = self.ttl / 3
        last_ok = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await self.storage.renew_thread_lock(thread_id, holder, self.ttl)
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
