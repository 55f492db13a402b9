"""`MemoryWorker`: applies the memory write queue in the background, exactly once in effect.

One claim → for each batch: check compaction commits → `MemoryManager.remember(namespace,
merged messages, key=batch.key)` → complete; on an error, a retry with exponential backoff or,
after `max_attempts`, a dead letter with the error kept. A crash anywhere leaves the batch
claimed until its lease expires (or the worker restarts under the same id, `release_owned`);
the replay is a no-op where the apply had committed (deterministic fact ids, decision
``deduplicated``), so nothing is lost and nothing is applied twice.

Written once as step generators (`run_once_steps`), with `run_once` / `arun_once` drivers; a
background thread (`start` / `stop`) for library use and an asyncio task (`astart` /
`astop`) for the gateway. Stopping is graceful: no new claim, the batch in hand finishes (or,
past the deadline, is released), the rest stays queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable

from foldwise._crash import crash_point
from foldwise._steps import Io, Steps, async_method, sync_method
from foldwise.errors import MemoryInputError
from foldwise.memory._facts import FactSource
from foldwise.memory._manager import MemoryManager
from foldwise.memory._outbox import MemoryOutbox, OutboxBatch

__all__ = ["CommitCheck", "MemoryWorker"]

logger = logging.getLogger(__name__)

CommitCheck = Callable[[str, str], "bool | Awaitable[bool | None] | None"]
"""``commit_check(thread_id, commit_ref)``: did the compaction that enqueued the span commit?
`True` yes (apply), `False` never (discard), `None` not known yet (retry later)."""

NOT_COMMITTED = "not_committed"


def _check_commit_sync(check: CommitCheck, thread_id: str, ref: str) -> bool | None:
    verdict = check(thread_id, ref)
    if inspect.isawaitable(verdict):
        close = getattr(verdict, "close", None)
        if close is not None:
            close()
        raise TypeError("an async commit_check needs the async worker (arun_once / astart)")
    return verdict


async def _acheck_commit(check: CommitCheck, thread_id: str, ref: str) -> bool | None:
    if inspect.iscoroutinefunction(check):
        return await check(thread_id, ref)  # type: ignore[no-any-return]
    if getattr(check, "loop_aware", False):  # reads with async I/O when called on the loop
        found = check(thread_id, ref)
        return await found if inspect.isawaitable(found) else found
    verdict = await asyncio.to_thread(check, thread_id, ref)  # a sync check may do I/O
    if inspect.isawaitable(verdict):
        return await verdict
    return verdict


def _positive(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MemoryInputError("must be a positive number", field=field)


class MemoryWorker:
    """Applies queued memory updates (see the module docstring).

    Args:
        manager: Applies a batch (`MemoryManager.remember` with the batch's key).
        outbox: The queue (`open_outbox`).
        worker_id: Who holds leases (default: a random id; a stable one lets a restarted
            worker take back its own claims at once instead of waiting for their leases).
        lease_seconds: How long a claim stays ours; past it another worker may re-claim.
        poll_seconds: The background loop's wait when nothing is due.
        max_attempts: Failed attempts before a batch is dead-lettered.
        backoff_seconds: The first retry's delay; doubled per attempt.
        max_backoff_seconds: The longest retry delay.
        commit_check: Checks a compaction span's commit (see `CommitCheck`); without one a
            compaction item is applied.
    """

    def __init__(
        self,
        manager: MemoryManager,
        outbox: MemoryOutbox,
        *,
        worker_id: str | None = None,
        lease_seconds: float = 60.0,
        poll_seconds: float = 1.0,
        max_attempts: int = 5,
        backoff_seconds: float = 2.0,
        max_backoff_seconds: float = 300.0,
        commit_check: CommitCheck | None = None,
    ) -> None:
        for value, field in ((lease_seconds, "lease_seconds"), (poll_seconds, "poll_seconds")):
            _positive(value, field)
        _positive(backoff_seconds, "backoff_seconds")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise MemoryInputError("must be a positive integer", field="max_attempts")
        self.manager = manager
        self.outbox = outbox
        self.worker_id = worker_id or f"memory-worker-{uuid.uuid4().hex[:12]}"
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.max_attempts = max_attempts
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.commit_check = commit_check
        self.applied = 0
        """Batches applied by this worker (completed, not discarded)."""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._held: OutboxBatch | None = None
        self._wake: asyncio.Event | None = None
        self._nudge = threading.Event()
        self._event_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"MemoryWorker({self.worker_id!r})"

    def retry_delay(self, attempts: int) -> float:
        """Seconds before retry number `attempts` (1-based): exponential, capped."""
        return float(min(self.max_backoff_seconds, self.backoff_seconds * 2 ** (attempts - 1)))

    # --- one pass ------------------------------------------------------------------------------

    def run_once_steps(self, *, ignore_debounce: bool = False) -> Steps[int]:
        """Claim one due batch and apply it; return how many batches were handled (0 or 1)."""
        outbox = self.outbox
        batches: list[OutboxBatch] = yield Io.of(
            outbox.claim,
            outbox.aclaim,
            self.worker_id,
            lease_seconds=self.lease_seconds,
            ignore_debounce=ignore_debounce,
        )
        if batches:
            crash_point("outbox.claim.after")  # tests only
        for batch in batches:
            self._held = batch  # released by `astop` if the task is cancelled mid-batch
            yield from self._process_steps(batch)
            self._held = None
        return len(batches)

    def _commits_steps(self, batch: OutboxBatch) -> Steps[tuple[list[int], bool]]:
        """Row ids whose compaction never committed, and whether any is still unknown."""
        discarded: list[int] = []
        check = self.commit_check
        for item in batch.items:
            if check is None or item.commit_ref is None:
                continue
            verdict = yield Io(
                _check_commit_sync, _acheck_commit, (check, item.thread_id or "", item.commit_ref)
            )
            if verdict is None:
                return discarded, True
            if verdict is False:
                discarded.append(item.id)
        return discarded, False

    def _process_steps(self, batch: OutboxBatch) -> Steps[None]:
        outbox = self.outbox
        discarded, unknown = yield from self._commits_steps(batch)
        if unknown:  # the compaction has not committed or failed yet: ask again later
            yield Io.of(outbox.release, outbox.arelease, batch, retry_in=self.poll_seconds)
            return
        messages = batch.messages(exclude=discarded)
        if messages:
            last = batch.items[-1]
            source = FactSource(
                thread_id=batch.thread_id,
                message_ids=tuple(m.id or "" for m in messages),
                run_id=last.run_id,
                via=self.manager.extractor.name,
            )
            crash_point("outbox.apply.before")  # tests only
            try:
                yield from self.manager.remember_steps(
                    batch.namespace, messages, source=source, key=batch.key
                )
            except Exception as exc:
                yield from self._fail_steps(batch, exc)
                return
            crash_point("outbox.apply.after")  # tests only
            self.applied += 1
        yield Io.of(
            outbox.complete, outbox.acomplete, batch, discarded=discarded, reason=NOT_COMMITTED
        )
        crash_point("outbox.complete.after")  # tests only

    def _fail_steps(self, batch: OutboxBatch, exc: Exception) -> Steps[None]:
        attempts = batch.attempts + 1
        dead = attempts >= self.max_attempts
        retry_in = None if dead else self.retry_delay(attempts)
        logger.warning(
            "memory update for thread %s failed (attempt %d of %d%s): %s",
            batch.thread_id,
            attempts,
            self.max_attempts,
            ", dead-lettered" if dead else "",
            exc,
        )
        error = f"{type(exc).__name__}: {exc}"
        yield Io.of(self.outbox.fail, self.outbox.afail, batch, error, retry_in=retry_in)

    run_once = sync_method(run_once_steps)
    arun_once = async_method(run_once_steps)

    # --- flush ---------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> int:
        """Apply everything queued now, debounce ignored; return the batches handled.

        Waits for batches other workers hold. Raises `TimeoutError` past `timeout` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        handled = 0
        while True:
            count = self.run_once(ignore_debounce=True)
            handled += count
            if count:
                continue
            if self.outbox.status(dead_limit=1).live == 0:
                return handled
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("the memory queue did not drain in time")
            time.sleep(min(0.05, self.poll_seconds))

    async def aflush(self, timeout: float | None = None) -> int:  # noqa: ASYNC109 - as `flush`
        """Async `flush`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        handled = 0
        while True:
            count = await self.arun_once(ignore_debounce=True)
            handled += count
            if count:
                continue
            if (await self.outbox.astatus(dead_limit=1)).live == 0:
                return handled
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("the memory queue did not drain in time")
            await asyncio.sleep(min(0.05, self.poll_seconds))

    def wake(self) -> None:
        """Cut the idle wait short: something was just enqueued (safe from any thread)."""
        self._nudge.set()
        loop, event = self._event_loop, self._wake
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    # --- background thread ---------------------------------------------------------------------

    def start(self) -> None:
        """Run the worker in a daemon thread until `stop`."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self.outbox.release_owned(self.worker_id)
        self._thread = threading.Thread(target=self._loop, name=self.worker_id, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                handled = self.run_once()
            except Exception:
                logger.exception("memory worker %s: a queue pass failed; retrying", self.worker_id)
                handled = 0
            if not handled:
                self._nudge.wait(self.poll_seconds)
                self._nudge.clear()

    def request_stop(self) -> None:
        """Ask the worker thread to stop after the batch in hand, without waiting for it."""
        self._stopping.set()
        self._nudge.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop claiming; wait up to `timeout` for the batch in hand. `True` once stopped."""
        self._stopping.set()
        self._nudge.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        stopped = not thread.is_alive()
        if stopped:
            self._thread = None
        return stopped

    # --- asyncio task --------------------------------------------------------------------------

    async def astart(self) -> None:
        """Run the worker as a task on the running loop until `astop`."""
        if self._task is not None and not self._task.done():
            return
        self._stopping.clear()
        self._wake = asyncio.Event()
        self._event_loop = asyncio.get_running_loop()
        await self.outbox.arelease_owned(self.worker_id)
        self._task = asyncio.get_running_loop().create_task(self._aloop(), name=self.worker_id)

    async def _aloop(self) -> None:
        while not self._stopping.is_set():
            try:
                handled = await self.arun_once()
            except asyncio.CancelledError:
                await self._release_held()
                raise
            except Exception:
                logger.exception("memory worker %s: a queue pass failed; retrying", self.worker_id)
                handled = 0
            if not handled:
                await self._apause()

    async def _apause(self) -> None:
        wake = self._wake
        if wake is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll_seconds):
                await wake.wait()
        if not self._stopping.is_set():
            wake.clear()

    async def _release_held(self) -> None:
        batch = self._held
        if batch is None:
            return
        self._held = None
        try:
            await self.outbox.arelease(batch)
        except Exception:  # the lease expires anyway; the batch is never lost
            logger.exception("memory worker %s: could not release its batch", self.worker_id)

    async def astop(self, deadline: float | None = None) -> None:
        """Stop claiming; let the batch in hand finish within `deadline` seconds.

        Past the deadline the task is cancelled and its batch released (queued again, nothing
        dropped); the rest of the queue stays queued.
        """
        self._stopping.set()
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=deadline)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif not task.cancelled() and task.exception() is not None:
            logger.error("memory worker %s ended with an error", self.worker_id)
