"""The asynchronous write path of an agent: enqueue on the answer's path, apply in a worker.

`MemoryPipeline` ties a `MemoryOutbox` (durable in the memory database, or in-process for
``memory://``) to a `MemoryWorker` (a background thread in library use; in the gateway one
asyncio task per process, started by the gateway itself). `MemoryMiddleware.after_agent` only
enqueues the run's slice; a compaction enqueues the span it removes before it commits
(`compaction_flush`, a `Compactor` flush), under its receipt id, and the worker applies that
span only once the receipt is in the thread's state (`graph_commit_check`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise._steps import Io, Steps, perform, run_async, run_sync
from foldwise._thread_id import NO_THREAD, current_config
from foldwise.memory._facts import Namespace, utcnow
from foldwise.memory._identity import resolve_namespace
from foldwise.memory._outbox import Enqueued, MemoryOutbox
from foldwise.memory._worker import MemoryWorker

__all__ = ["MemoryPipeline", "checkpointer_commit_check", "graph_commit_check"]

_REF_SEPARATOR = "@"


def _commit_ref(receipt_id: str) -> str:
    return f"{receipt_id}{_REF_SEPARATOR}{utcnow().isoformat()}"


def _parse_ref(ref: str) -> tuple[str, datetime | None]:
    receipt_id, _, at = ref.partition(_REF_SEPARATOR)
    try:
        return receipt_id, datetime.fromisoformat(at) if at else None
    except ValueError:
        return receipt_id, None


def _verdict(snapshot: Any, ref: str) -> bool | None:
    """Committed (`True`), never (`False`: a later checkpoint lacks it), or not yet (`None`)."""
    receipt_id, flushed_at = _parse_ref(ref)
    values = getattr(snapshot, "values", None) or {}
    if not values:
        return True  # no persisted thread (no checkpointer): nothing can roll it back
    if any(r.get("id") == receipt_id for r in values.get("compactions") or []):
        return True
    created = getattr(snapshot, "created_at", None)
    if flushed_at is None or not created:
        return None
    head = datetime.fromisoformat(str(created))
    return False if head > flushed_at else None


class _LoopAwareCheck:
    """A check that reads asynchronously when called on a running loop.

    `loop_aware` tells the async worker to call it on the loop (not in a thread, where it would
    take the sync path and call a sync checkpointer method from the async worker).
    """

    loop_aware = True

    def __init__(self, check: Callable[[str, str], Any]) -> None:
        self._check = check

    def __call__(self, thread_id: str, ref: str) -> Any:
        return self._check(thread_id, ref)


def graph_commit_check(graph: Any) -> Callable[[str, str], Any]:
    """A `CommitCheck` reading the thread's head from `graph` (sync or async, as called).

    The graph is held weakly (a worker thread must not keep a dropped agent alive); a graph
    without a checkpointer persists no thread, so nothing can roll its compaction back.
    """
    graph_ref = weakref.ref(graph)

    def check(thread_id: str, ref: str) -> Any:
        graph = graph_ref()
        if graph is None:
            return None  # the agent is gone: its worker is stopping, leave the span queued
        if getattr(graph, "checkpointer", None) in (None, False):
            return True
        config = {"configurable": {"thread_id": thread_id}}
        if hasattr(graph, "aget_state") and _in_loop():

            async def read() -> bool | None:
                return _verdict(await graph.aget_state(config), ref)

            return read()
        return _verdict(graph.get_state(config), ref)

    return _LoopAwareCheck(check)


class _Head:
    """A checkpoint tuple read as the two things `_verdict` needs."""

    def __init__(self, found: Any) -> None:
        checkpoint = getattr(found, "checkpoint", None) or {}
        self.values = checkpoint.get("channel_values") or {}
        self.created_at = checkpoint.get("ts")


def checkpointer_commit_check(checkpointer: Any) -> Callable[[str, str], Any]:
    """A `CommitCheck` reading the thread's head checkpoint (the gateway's worker uses it)."""

    def check(thread_id: str, ref: str) -> Any:
        config = {"configurable": {"thread_id": thread_id}}
        if _in_loop():

            async def read() -> bool | None:
                return _verdict(_Head(await checkpointer.aget_tuple(config)), ref)

            return read()
        return _verdict(_Head(checkpointer.get_tuple(config)), ref)

    return _LoopAwareCheck(check)


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class MemoryPipeline:
    """The outbox an agent enqueues to, and the worker (if this process runs one)."""

    outbox: MemoryOutbox
    agent: str = "agent"
    debounce_seconds: float = 0.0
    worker: MemoryWorker | None = None
    _ready: bool = field(default=False, init=False, repr=False)

    def _ready_steps(self) -> Steps[None]:
        if not self._ready:
            yield Io.of(self.outbox.setup, self.outbox.asetup)
            self._ready = True

    def enqueue_steps(
        self,
        namespace: Namespace,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None,
        run_id: str | None = None,
        origin: str = "run",
        commit_ref: str | None = None,
    ) -> Steps[Enqueued | None]:
        """Queue `messages` for memory (no model call, one insert); wake the local worker."""
        if not messages:
            return None
        yield from self._ready_steps()
        done = yield from perform(
            Io.of(
                self.outbox.enqueue,
                self.outbox.aenqueue,
                namespace,
                list(messages),
                thread_id=None if thread_id == NO_THREAD else thread_id,
                run_id=run_id,
                origin=origin,  # type: ignore[arg-type]
                commit_ref=commit_ref,
                debounce_seconds=self.debounce_seconds,
            )
        )
        if self.worker is not None:
            self.worker.wake()
        return done

    def compaction_flush(self, event: Any, receipt_id: str) -> Io[Any]:
        """A `Compactor` flush: the removed span, queued under the receipt it commits with."""
        namespace = resolve_namespace(current_config(), self.agent)
        steps = self.enqueue_steps(
            namespace,
            list(event.messages_to_summarize),
            thread_id=event.thread_id,
            origin="compaction",
            commit_ref=_commit_ref(receipt_id),
        )
        return Io.of(_drive_sync, _drive_async, steps)


def _drive_sync(steps: Steps[Any]) -> Any:
    return run_sync(steps)


async def _drive_async(steps: Steps[Any]) -> Any:
    return await run_async(steps)
