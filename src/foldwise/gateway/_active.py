"""`RunSpec` (what to run) and `ActiveRun` (a run in flight), shared by the manager and routes."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import Command

from foldwise.errors import FoldwiseError
from foldwise.gateway._agents import HostedAgent
from foldwise.gateway._capture import TranscriptRecorder
from foldwise.gateway._errors import LeaseLostError, RunFailedError, RunInterruptedError
from foldwise.gateway._held_writes import flush_writes
from foldwise.gateway._leases import Lease
from foldwise.gateway._stream import EventBuffer
from foldwise.gateway.storage import GatewayStorage, RunStatus

logger = logging.getLogger(__name__)

__all__ = [
    "DEAD_WORKER",
    "REPLAY_EVENTS",
    "ActiveRun",
    "RunSpec",
    "fail_dead_runs",
    "flush_run_writes",
    "record_start",
]

DEAD_WORKER = "worker died during the run"
"""The error of a run whose worker stopped while it ran (its lease lapsed)."""

REPLAY_EVENTS = 10_000
"""Events a resumable run keeps for clients that rejoin with `Last-Event-ID`."""


def _wanted(event: str, events: frozenset[str] | None) -> bool:
    return events is None or event.split("|")[0] in events


@dataclass(frozen=True)
class RunSpec:
    """What to run.

    Attributes:
        thread_id: The thread.
        assistant_id: The assistant the client named.
        model_name: The run model (`None`: the assistant's default).
        hosted: The agent.
        messages: Parsed input messages (with ids).
        stream_modes: The stream modes the client asked for (empty for `/runs/wait`).
        durability: LangGraph durability mode, if the client chose one.
        recursion_limit: LangGraph recursion limit, if the client chose one.
        metadata: Client metadata, stored with the run row.
        command: LangGraph `Command` arguments (`resume`, `goto`); `messages` go in its update.
        checkpoint_id: The checkpoint to run from (`None`: the head; an earlier one forks).
        stream_subgraphs: Stream the events of subgraphs too.
        resumable: Number the events and keep the last `REPLAY_EVENTS` of them, so a client
            can rejoin with `Last-Event-ID` while the run is live (`stream_resumable`).
        user_id: The caller's authenticated identity (`None` without auth): the run's
            ``configurable.user_id``, whose long-term memory the run reads and writes.
    """

    thread_id: str
    assistant_id: str
    model_name: str | None
    hosted: HostedAgent
    messages: Sequence[BaseMessage]
    stream_modes: Sequence[str] = ()
    durability: str | None = None
    recursion_limit: int | None = None
    metadata: Mapping[str, Any] | None = None
    command: Mapping[str, Any] | None = None
    checkpoint_id: str | None = None
    stream_subgraphs: bool = False
    resumable: bool = False
    user_id: str | None = None

    def graph_input(self, inputs: Sequence[BaseMessage]) -> Any:
        """What the graph is invoked with: a `Command`, new messages, or `None` (continue)."""
        update = {"messages": list(inputs)} if inputs else None
        if self.command is not None:
            resume, goto = self.command.get("resume"), self.command.get("goto", ())
            return Command(update=update, resume=resume, goto=goto)
        return update


@dataclass(eq=False)
class ActiveRun:
    """A run in flight: its task, its event buffer (when streamed) and its outcome."""

    run_id: str
    spec: RunSpec
    recorder: TranscriptRecorder
    inputs: list[BaseMessage]
    queue: EventBuffer | None = None
    graph_input: Any = None
    listeners: list[tuple[EventBuffer, frozenset[str] | None]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    status: RunStatus = "running"
    error: BaseException | None = None
    final_values: Any = None
    lease_lost: bool = False
    stopping: bool = False
    """`cancel` was called: later calls (a second lease-loss signal) must not cancel the cleanup."""
    finishing: bool = False
    """Its work is over and it records its end: `cancel` does nothing any more."""
    paused: bool = False
    """The graph stopped at an `interrupt()`: the run ends `interrupted`, without an error."""
    rollback: bool = False
    """Cancelled with `action=rollback`: the thread returns to `start_checkpoint`, the row goes."""
    start_checkpoint: str | None = None
    """The thread's head when the run started (`None`: the thread had no checkpoint)."""
    log: deque[tuple[int, str, Any]] = field(default_factory=lambda: deque(maxlen=REPLAY_EVENTS))
    """A resumable run's last events, numbered, for `replay`."""
    next_event_id: int = 1
    queued: bool = False
    """It waited in the run queue: its waiter may look for it only after it ended."""

    @property
    def thread_id(self) -> str:
        """The run's thread."""
        return self.spec.thread_id

    def publish(self, event: str, data: Any, *, closing: bool = False) -> None:
        """Queue an event for the streaming client (no-op when nobody listens).

        The buffer is bounded: a client too far behind gets an `error` event and its stream
        ends, while the run goes on (see `EventBuffer`).
        """
        event_id = None
        if self.spec.resumable:
            event_id = self.next_event_id
            self.next_event_id += 1
            self.log.append((event_id, event, data))
        if self.queue is not None:
            self.queue.put(event, data, closing=closing, event_id=event_id)
        for buffer, events in self.listeners:
            if _wanted(event, events) or closing:
                buffer.put(event, data, closing=closing, event_id=event_id)

    def replay(self, buffer: EventBuffer, after: int, events: frozenset[str] | None = None) -> None:
        """Queue the kept events numbered above `after` (a client's `Last-Event-ID`)."""
        for event_id, event, data in self.log:
            if event_id > after and _wanted(event, events):
                buffer.put(event, data, event_id=event_id)

    def attach(self, buffer: EventBuffer, events: frozenset[str] | None = None) -> None:
        """Send the run's next events to another client too (`GET .../runs/{id}/stream`).

        Args:
            buffer: The client's buffer.
            events: The event names it wants (`None`: all); `error` and `end` always go.
        """
        self.listeners.append((buffer, events))

    def unattach(self, buffer: EventBuffer) -> None:
        """Stop sending events to a joined client."""
        self.listeners = [(b, e) for b, e in self.listeners if b is not buffer]

    def close_streams(self) -> None:
        """End every client's stream after the frames already queued."""
        for buffer in [*([self.queue] if self.queue else []), *(b for b, _ in self.listeners)]:
            buffer.close()

    def detach(self) -> None:
        """The client went away: stop queueing events."""
        self.queue = None

    def cancel(self, *, rollback: bool = False) -> None:
        """Stop the run (once); it ends `interrupted` with its completed steps kept.

        With `rollback`, the thread is put back where the run started and the run deleted.
        """
        if self.task is None or self.task.done() or self.finishing:
            # Its work is over: it is recording its end (its row, the thread's status, the
            # lease); cancelling that would leave the row `running` and the lease held.
            return
        self.rollback = self.rollback or rollback
        if not self.stopping:
            self.stopping = True
            self.task.cancel()

    async def wait(self) -> None:
        """Wait for the end of the run without cancelling it if the waiter is cancelled."""
        assert self.task is not None
        await asyncio.shield(self.task)

    def outcome_error(self) -> FoldwiseError | None:
        """The error to report for a finished run, if it did not succeed."""
        if self.status == "success" or self.paused:
            return None
        if self.lease_lost:
            return LeaseLostError(self.thread_id)
        if self.status == "interrupted":
            return RunInterruptedError(self.run_id)
        if isinstance(self.error, FoldwiseError):
            return self.error
        return RunFailedError(self.run_id, self.error or RuntimeError("unknown error"))


async def record_start(
    storage: GatewayStorage,
    spec: RunSpec,
    run_id: str,
    recorder: TranscriptRecorder,
    values: Mapping[str, Any],
    inputs: Sequence[BaseMessage],
    queued: bool,
) -> bool:
    """Record a run's start in one transaction: its row, the thread busy, the input.

    Called holding the thread's lease. Returns `False` (nothing written) when a queued run
    is no longer pending.
    """
    thread_id = spec.thread_id
    async with storage.batch("start_run", thread_id):
        if queued:
            if not await storage.start_pending_run(run_id):
                return False
        else:
            metadata = dict(spec.metadata or {})
            await storage.create_run(thread_id, run_id, spec.assistant_id, "run", metadata=metadata)
        await storage.update_thread(
            thread_id,
            status="busy",
            metadata={"assistant_id": spec.assistant_id, "graph_id": spec.assistant_id},
        )
        # The tables, not the state, say what is recorded: a crash after a checkpoint commit
        # left its messages and receipts unrecorded; they go first, then the inputs.
        await recorder.reconcile(values, inputs)
    return True


async def fail_dead_runs(
    storage: GatewayStorage, thread_id: str, lease: Lease | None, live: Mapping[str, Any]
) -> None:
    """Fail the thread's runs left `running` by a dead worker (none of `live` is dead).

    Called holding the thread's `lease`, so a `running` run not in `live` has no worker.

    Raises:
        LeaseLostError: The holder stalled past its lease since it took it: such a run may be
            live in the worker that took the thread over, so none is failed.
    """
    dead = [
        record
        for record in await storage.list_runs(thread_id, limit=20)
        if record.status == "running" and record.run_id not in live
    ]
    if dead and lease is not None:
        await lease.verify()  # a query only when there is something to fail
    for record in dead:
        await storage.finish_run(record.run_id, "error", DEAD_WORKER)


async def flush_run_writes(run: ActiveRun, status: RunStatus) -> RunStatus:
    """Commit the run's task writes no checkpoint took along (an interrupt's, an error's).

    Returns the run's status: `error` when their lease was lost (they are dropped).
    """
    try:
        await flush_writes(run.spec.hosted.graph.checkpointer, run.thread_id)
    except LeaseLostError:
        run.lease_lost = True
        return "error"
    except Exception:
        logger.exception("thread %s: run %s's last writes failed", run.thread_id, run.run_id)
    return status
