"""`RunManager`: runs and other thread writes, one at a time per thread, safely stoppable.

A run executes as a background task owned by the manager, not by the HTTP request: a client
that disconnects does not tear a thread in half, and shutdown can wait for runs or cancel them.
Each run holds the thread's lease for its whole life (renewed while it streams) and, whatever
happens, ends with its row finished (`success`, `error` or `interrupted`), the thread's status
updated and the lease released. A cancelled run leaves the steps it completed; tool calls left
without a result get an error result, so the next request never carries an orphaned call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import END

from foldwise._crash import crash_point
from foldwise._lru import LRUDict
from foldwise.errors import StorageError, ThreadBusyError, ThreadNotFoundError
from foldwise.gateway import _stream as streams
from foldwise.gateway._active import (
    ActiveRun,
    RunSpec,
    fail_dead_runs,
    flush_run_writes,
    record_start,
)
from foldwise.gateway._capture import TranscriptRecorder, checkpoint_snapshot, record_values
from foldwise.gateway._decode_cache import read_kept
from foldwise.gateway._errors import (
    BusyError,
    GatewayClosingError,
    LeaseLostError,
    RequestFieldError,
)
from foldwise.gateway._faults import pause_after_checkpoint
from foldwise.gateway._leases import ThreadLeases, lease_of
from foldwise.gateway._messages import check_new_ids, check_tool_results, interrupted_results
from foldwise.gateway._stream import EventBuffer
from foldwise.gateway._telemetry import traced_run
from foldwise.gateway._undo import at_checkpoint, head_id, repair_open_calls, revert_run
from foldwise.gateway.storage import GatewayStorage, RunStatus, ThreadStatus
from foldwise.messages import analyze_tool_pairing

__all__ = ["ActiveRun", "RunManager", "RunSpec"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CLEANUP_SECONDS = 10.0
_INTERRUPT = "__interrupt__"
_RECENT_RUNS = 32
"""Finished queued runs whose results stay readable by a waiter that looks after they ended."""


class RunManager:
    """Starts runs, guards other thread writes, and stops everything on shutdown.

    Args:
        storage: The gateway storage.
        leases: Thread leases on that storage.
        new_buffer: Makes a streaming run's buffer from its run and thread ids: `EventBuffer`
            with the limits on how far a client may fall behind.
    """

    def __init__(
        self,
        storage: GatewayStorage,
        leases: ThreadLeases,
        *,
        new_buffer: Callable[[str, str], EventBuffer] = EventBuffer,
    ) -> None:
        self.storage = storage
        self.leases = leases
        self.new_buffer = new_buffer
        self._active: dict[str, ActiveRun] = {}
        # A queued run's waiter may first look after the run ended: its result is kept here
        # (only a queued run's: each holds its final state, a copy of the thread's history).
        self.recent: LRUDict[str, ActiveRun] = LRUDict(_RECENT_RUNS)
        self._closing = False
        self.on_idle: Callable[[], None] = lambda: None
        """Called when a run ends (the run queue wakes up: the thread may have a next run)."""

    @property
    def closing(self) -> bool:
        """`shutdown` was called: no new work is accepted."""
        return self._closing

    @property
    def active(self) -> Mapping[str, ActiveRun]:
        """Runs in flight in this process, by run id."""
        return self._active

    # -- exclusive operations (compaction, deletion) -----------------------------------------

    async def _reconcile(self, thread_id: str, holder: str) -> None:
        """Fail runs a crashed worker left `running` (`fail_dead_runs`; we hold the lease)."""
        lease = self.leases.held(thread_id, holder)
        await fail_dead_runs(self.storage, thread_id, lease, self._active)

    async def reconcile_transcript(self, thread_id: str, graph: Any) -> int:
        """Record what a crash left in the thread state only (call holding the thread's lease).

        `exclusive(..., graph=)` calls it before a compaction removes messages from the state;
        a run does the same in `start`. Returns how many messages and receipts were missing.
        """
        snapshot = await checkpoint_snapshot(graph, {"configurable": {"thread_id": thread_id}})
        recorder = TranscriptRecorder(self.storage, thread_id, None)
        return await recorder.reconcile(snapshot.values or {})

    async def record_receipt(
        self,
        thread_id: str,
        operation_id: str,
        receipt: Mapping[str, Any],
        graph: Any,
        summary_text: str | None = None,
    ) -> None:
        """Store a manual compaction's receipt and marker (its checkpoint is committed).

        `summary_text` is the summary the compaction produced, recorded in the marker.
        """
        recorder = TranscriptRecorder(self.storage, thread_id, operation_id)
        await pause_after_checkpoint(graph, recorder, {"compactions": [receipt]})  # tests only
        crash_point("receipt.manual.before")  # tests only
        await recorder.receipt(receipt, summary_text)
        crash_point("receipt.manual.after")  # tests only

    @asynccontextmanager
    async def exclusive(
        self, thread_id: str, kind: str, *, graph: Any = None
    ) -> AsyncIterator[str]:
        """Hold the thread's lease for an operation; yields its id (also its run id).

        With `graph` (a compaction, which removes messages from the state), what a crash left
        in the state only is first recorded in the transcript (`reconcile_transcript`).

        Raises:
            BusyError: A run or another operation holds the thread (409).
            GatewayClosingError: The gateway is shutting down (503).
        """
        if self._closing:
            raise GatewayClosingError()
        operation_id = str(uuid.uuid4())
        await self.leases.acquire(thread_id, operation_id, kind)
        try:
            await self._reconcile(thread_id, operation_id)
            if graph is not None:
                await self.reconcile_transcript(thread_id, graph)
            yield operation_id
        finally:
            await self.leases.release(thread_id, operation_id)

    async def guarded(self, thread_id: str, operation_id: str, work: Awaitable[T]) -> T:
        """Run `work` while renewing the lease; stop it if the lease is lost.

        Raises:
            LeaseLostError: Another worker took the thread over while `work` ran.
        """
        task = asyncio.ensure_future(work)
        lost = False

        def on_lost() -> None:
            nonlocal lost
            lost = True
            task.cancel()

        keeper = asyncio.create_task(self.leases.keep_alive(thread_id, operation_id, on_lost))
        try:
            return await task
        except asyncio.CancelledError:
            if lost:
                raise LeaseLostError(thread_id) from None
            raise
        finally:
            keeper.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(task), _CLEANUP_SECONDS)
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    # -- runs ----------------------------------------------------------------------------------

    def _run_config(self, run_id: str, spec: RunSpec) -> RunnableConfig:
        config: RunnableConfig = {
            # The lease rides along so the checkpointer commits only while this run holds it.
            "configurable": {
                "thread_id": spec.thread_id,
                # Memory's namespace: the authenticated caller, never a client-sent value.
                **({"user_id": spec.user_id} if spec.user_id else {}),
                **self.leases.fence(spec.thread_id, run_id),
            },
            "run_id": uuid.UUID(run_id),
            "metadata": {
                "run_id": run_id,
                "thread_id": spec.thread_id,
                "assistant_id": spec.assistant_id,
                "graph_id": spec.assistant_id,
                "model_name": spec.model_name,
            },
        }
        if spec.recursion_limit is not None:
            config["recursion_limit"] = spec.recursion_limit
        return config

    async def _prepare(
        self, spec: RunSpec, config: RunnableConfig
    ) -> tuple[RunnableConfig, list[BaseMessage], dict[str, Any], str | None]:
        """Resolve the checkpoint to run from; return its config, inputs, values and head id.

        The head's id is where a rollback returns to. An earlier checkpoint forks the thread
        there, as LangGraph does: the head moves, so what a crash left unrecorded is recorded first.
        """
        graph = spec.hosted.graph
        head = await read_kept(graph.aget_state(config))  # the loop reads it next: decoded once
        snapshot = head
        new_input = bool(spec.messages) and spec.command is None
        # Tools that finished in a step that failed (or a crash cut) keep their results, which
        # new input would discard: once the input is checked, that step is ended with them.
        end_step = new_input and spec.checkpoint_id is None
        end_step = end_step and any(t.result is not None for t in head.tasks)
        if new_input and head.tasks and not end_step:
            # New input discards what tasks finished after the head checkpoint (a crash
            # left): the run, its repairs and the transcript start from the checkpoint.
            snapshot = await checkpoint_snapshot(graph, config)
        if spec.checkpoint_id is not None and spec.checkpoint_id != head_id(head):
            config = at_checkpoint(config, spec.checkpoint_id)
            snapshot = await read_kept(graph.aget_state(config))  # the loop runs from it
            if snapshot.created_at is None:
                raise RequestFieldError(
                    "checkpoint_id", f"no checkpoint {spec.checkpoint_id!r} in this thread"
                )
            await TranscriptRecorder(self.storage, spec.thread_id, None).reconcile(
                head.values or {}
            )
        if not spec.messages and spec.command is None and snapshot.created_at is None:
            raise RequestFieldError("input", 'required: {"messages": [...]} (nothing to continue)')
        values = dict(snapshot.values or {})
        history = list(values.get("messages") or [])
        check_new_ids(spec.messages, [*history, *(head.values or {}).get("messages", [])])
        pending = [call_id for _, call_id in analyze_tool_pairing(history).pending_calls]
        check_tool_results(spec.messages, pending)
        # Pending tasks (an interrupt, a fork before a node) answer their own tool calls.
        repairs = [] if snapshot.next and not spec.messages else interrupted_results(history)
        answered = {getattr(m, "tool_call_id", None) for m in spec.messages}
        inputs = [*(r for r in repairs if r.tool_call_id not in answered), *spec.messages]
        if end_step:  # not under this run's id, or LangGraph takes the input for a re-entry
            await graph.aupdate_state({"configurable": config["configurable"]}, None, END)
            head = await graph.aget_state(config)
        return config, inputs, values, head_id(head)

    async def start(self, spec: RunSpec, *, stream: bool) -> ActiveRun:
        """Take the thread, record the input and start the run in the background.

        Raises:
            BusyError: A run or compaction holds the thread, or runs wait queued on it (409).
            RequestFieldError: A tool result in the input answers no call, or an unknown
                checkpoint (422).
            GatewayClosingError: The gateway is shutting down (503).
        """
        if self._closing:
            raise GatewayClosingError()
        run_id = str(uuid.uuid4())
        await self.leases.acquire(spec.thread_id, run_id, "run")
        run = await self._launch(spec, run_id, stream=stream, queued=False)
        assert run is not None  # only a queued run can be skipped
        return run

    async def claim(self, spec: RunSpec, run_id: str) -> ActiveRun | None:
        """Start the queued (`pending`) run `run_id` if its thread is free and it is next.

        Returns `None` when the thread is held, another pending run is older, or the run is
        no longer pending (cancelled). A run that cannot start (its input no longer fits the
        thread) is finished `error` and `None` is returned.
        """
        if self._closing:
            return None
        try:
            await self.leases.acquire(spec.thread_id, run_id, "run")
        except (ThreadBusyError, ThreadNotFoundError):
            return None
        try:
            return await self._launch(spec, run_id, stream=False, queued=True)
        except (ThreadNotFoundError, StorageError):
            raise
        except Exception:
            logger.exception("thread %s: queued run %s could not start", spec.thread_id, run_id)
            return None

    async def _launch(
        self, spec: RunSpec, run_id: str, *, stream: bool, queued: bool
    ) -> ActiveRun | None:
        """Holding the thread's lease: check the queue, prepare, record the input, start."""
        thread_id = spec.thread_id
        try:
            waiting = [r.run_id for r in await self.storage.thread_pending_runs(thread_id)]
            if not queued and waiting:
                raise BusyError(thread_id, "a queued run", 1)
            if queued and waiting[:1] != [run_id]:
                await self.leases.release(thread_id, run_id)
                return None
            await self._reconcile(thread_id, run_id)
            config, inputs, values, head = await self._prepare(spec, self._run_config(run_id, spec))
            recorder = TranscriptRecorder.from_values(self.storage, thread_id, run_id, values)
            recorder.lease = lease_of(config)
            if not await record_start(self.storage, spec, run_id, recorder, values, inputs, queued):
                await self.leases.release(thread_id, run_id)
                return None
        except BaseException as error:
            fails = isinstance(error, Exception)
            if queued and fails and not isinstance(error, StorageError | LeaseLostError):
                with contextlib.suppress(StorageError):
                    await self.storage.fail_pending_run(run_id, f"could not start: {error}")
            await self.leases.release(thread_id, run_id)
            raise
        buffer = self.new_buffer(run_id, thread_id) if stream else None
        run = ActiveRun(run_id, spec, recorder, inputs, queue=buffer, start_checkpoint=head)
        run.graph_input, run.queued = spec.graph_input(inputs), queued
        self._active[run_id] = run
        work = traced_run(run, config, self._execute)  # OpenTelemetry: the run's span
        run.task = asyncio.create_task(work, name=f"foldwise-run-{run_id}")
        return run

    @staticmethod
    async def _chunks(
        run: ActiveRun, config: RunnableConfig
    ) -> AsyncGenerator[tuple[tuple[str, ...], str, Any], None]:
        """The graph's `(namespace, mode, chunk)` stream; `events` mode publishes the rest.

        With `events`, the graph runs under `astream_events` (v2): the root's `on_chain_stream`
        events carry the stream-mode chunks, every other event goes to the client as an
        `events` event, except the summarizer's.
        """
        spec = run.spec
        kwargs: dict[str, Any] = {
            "stream_mode": streams.graph_stream_modes(spec.stream_modes),
            "subgraphs": True,
        }
        if spec.durability is not None:
            kwargs["durability"] = spec.durability
        graph = spec.hosted.graph
        if "events" not in spec.stream_modes:
            # Closed here, not by the garbage collector: its last writes happen inside the run.
            async with contextlib.aclosing(graph.astream(run.graph_input, config, **kwargs)) as it:
                async for item in it:
                    yield item
            return
        events = graph.astream_events(run.graph_input, config, version="v2", **kwargs)
        async with contextlib.aclosing(events) as it:
            async for event in it:
                if event["event"] == "on_chain_stream" and event.get("run_id") == run.run_id:
                    yield event["data"]["chunk"]
                elif not streams.summarizer_chunk(event):
                    run.publish("events", streams.scrub(event))

    @staticmethod
    async def _values(run: ActiveRun, chunk: Any, held: list[Any] | None = None) -> None:
        """Record a root `values` chunk; an `__interrupt__` one marks the run paused.

        `held`: a durability "exit" run's chunks recorded when it ends (`record_values`).
        """
        if isinstance(chunk, Mapping) and _INTERRUPT in chunk:
            run.paused = True  # stopped at an `interrupt()`
        if isinstance(chunk, Mapping) and set(chunk) == {_INTERRUPT}:
            run.final_values = {**(run.final_values or {}), **chunk}
            return
        graph = run.spec.hosted.graph
        await pause_after_checkpoint(graph, run.recorder, chunk)  # tests only
        # Streamed before its checkpoint is saved: receipts wait for it (`committed_values`).
        await record_values(graph, run.recorder, chunk, held)
        run.final_values = chunk

    async def _consume(self, run: ActiveRun, config: RunnableConfig) -> None:
        spec = run.spec
        translator = streams.StreamTranslator(spec.stream_modes, run.publish)
        held: list[Any] | None = [] if spec.durability == "exit" else None
        async with contextlib.aclosing(self._chunks(run, config)) as chunks:
            async for namespace, mode, chunk in chunks:
                if namespace and not spec.stream_subgraphs:
                    continue
                if mode == "values" and not namespace:
                    await self._values(run, chunk, held)
                translator.feed(namespace, mode, chunk)
        for values in held or ():  # the run's checkpoint is saved now
            await record_values(spec.hosted.graph, run.recorder, values)

    async def _execute(self, run: ActiveRun, config: RunnableConfig) -> None:
        def on_lost() -> None:
            run.lease_lost = True
            run.cancel()

        self.leases.watch(run.thread_id, run.run_id, on_lost)  # a fenced write was refused
        keeper = asyncio.create_task(self.leases.keep_alive(run.thread_id, run.run_id, on_lost))
        status: RunStatus = "success"
        try:
            await self._consume(run, config)
            if run.paused:
                status = "interrupted"  # as LangGraph Server: waiting for `command.resume`
        except asyncio.CancelledError:
            status = "error" if run.lease_lost else "interrupted"
            logger.warning("run %s on thread %s stopped (%s)", run.run_id, run.thread_id, status)
            if not run.lease_lost and not run.rollback:
                await repair_open_calls(run, config)
        except Exception as error:
            status = "error"
            run.error = error
            run.lease_lost = run.lease_lost or isinstance(error, LeaseLostError)
            logger.exception("run %s on thread %s failed", run.run_id, run.thread_id)
        finally:
            run.finishing = True  # a cancel from now on changes nothing (`ActiveRun.cancel`)
            keeper.cancel()
            await asyncio.wait({keeper})
            status = await flush_run_writes(run, status)
            await self._finish(run, status, config)

    async def _finish(self, run: ActiveRun, status: RunStatus, config: RunnableConfig) -> None:
        run.status = status
        error = run.outcome_error()
        try:
            undo = run.rollback and not run.lease_lost
            reverted = undo and await revert_run(run, config, self.storage)
            # The run's row and the thread's status: one transaction.
            async with self.storage.batch("finish_run", run.thread_id):
                if not reverted:
                    crash_point("run.finish.before")  # tests only
                    await self.storage.finish_run(run.run_id, status, str(error) if error else None)
                # Runs still queued keep the thread busy (listings filter on the stored status).
                waiting = await self.storage.thread_pending_runs(run.thread_id)
                after: ThreadStatus = (
                    "busy" if waiting else "error" if status == "error" else "idle"
                )
                await self.storage.update_thread(run.thread_id, status=after)
            if not reverted:
                crash_point("run.finish.after")  # tests only
        except StorageError:
            logger.exception(
                "thread %s: could not record the end of run %s", run.thread_id, run.run_id
            )
        finally:
            await self.leases.release(run.thread_id, run.run_id)
            self._active.pop(run.run_id, None)
            if run.queued:
                self.recent[run.run_id] = run
            self.on_idle()
            if error is not None:
                error_data = {"error": type(error).__name__, "message": str(error)}
                run.publish("error", error_data, closing=True)
            run.publish("end", {"run_id": run.run_id, "status": status}, closing=True)
            run.close_streams()

    # -- cancelling and shutdown -------------------------------------------------------------

    async def interrupt_thread(self, thread_id: str, *, rollback: bool = False) -> None:
        """Cancel this process's runs of the thread and wait for them to end.

        With `rollback`, each run's thread state is rolled back and the run deleted.
        """
        runs = [r for r in self._active.values() if r.thread_id == thread_id]
        for run in runs:
            run.cancel(rollback=rollback)
        for run in runs:
            with contextlib.suppress(BaseException):
                await run.wait()

    async def shutdown(self, grace_seconds: float) -> None:
        """Refuse new work, let runs finish for `grace_seconds`, then cancel the rest.

        Cancelled runs end `interrupted`: completed steps stay in the thread, open tool calls
        get an error result, the lease is released.
        """
        self._closing = True
        runs = list(self._active.values())
        tasks = [r.task for r in runs if r.task is not None]
        if not tasks:
            return
        logger.info("shutdown: waiting up to %.1fs for %d run(s)", grace_seconds, len(tasks))
        _done, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for run in runs:
            if run.task in pending:
                run.cancel()
        if pending:
            await asyncio.wait(pending, timeout=_CLEANUP_SECONDS)
