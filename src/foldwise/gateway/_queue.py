"""`RunQueue`: runs that wait their turn in the gateway database, and who starts them.

A run is accepted in one of two ways. If its thread is free and nothing waits on it, it
starts at once in the accepting worker (`RunManager.start`). Otherwise, with
`multitask_strategy: enqueue`, it is stored `pending` with its request (`run_queue` table) and
its input is appended to the transcript right away, so the transcript holds every accepted
input whatever happens next. `reject` gets 409; `interrupt` and `rollback` first cancel the
thread's pending runs and its running run (in this worker, or by a request to the worker
executing it), then start the new one.

Every worker runs a dispatcher task. It wakes at once when a run is queued or ends here, and
every `poll_seconds` otherwise (for rows other workers queued, or left behind when they died).
It claims the oldest pending run of each thread by taking the thread's lease with the run id
as holder, the same lease every run holds, so claims need no other lock on either database;
the claim moves the row to `running` (`start_pending_run`, which a concurrent cancel can win)
and the run executes like any other.

A dead worker's runs, decided here: a run it had claimed but not moved to `running` is still
`pending` and is claimed again once the lease lapses; a run it was executing stays `running`
until the thread's lease is free, then is finished `error` ("worker died during the run") by
the next reader, claimer or start-up (`settle`, `RunManager.claim`, `recover`), and the thread
goes back to `idle`. No run stays `running` for ever and no pending run is dropped.

Within a worker, acceptances on one thread take turns (`submit` holds a per-thread lock until
the run has started with its input recorded, or is queued with its input recorded), so the
transcript lists the user messages in the order the runs will run: without it, a request
queued while the first run was still starting, or two queued at once, recorded its input
ahead of a run that ran before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from langchain_core.messages import messages_from_dict, messages_to_dict

from foldwise.errors import ThreadBusyError, ThreadNotFoundError
from foldwise.gateway._active import DEAD_WORKER
from foldwise.gateway._agents import HostedAgent
from foldwise.gateway._capture import TranscriptRecorder
from foldwise.gateway._errors import BusyError, GatewayClosingError
from foldwise.gateway._manager import ActiveRun, RunManager, RunSpec
from foldwise.gateway._stream import EventBuffer
from foldwise.gateway._telemetry import note_dequeued, note_queue, traced_enqueue
from foldwise.gateway.storage import RunRecord, ThreadStatus

__all__ = ["DEFAULT_QUEUE_POLL", "CancelAction", "RunQueue", "Strategy"]

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_POLL = 1.0
"""Seconds between two looks at the queue when nothing woke the dispatcher."""
_RECOVER_PAGE = 1000
_DISPATCH_PAGE = 100
_STOP_SECONDS = 5.0
_STOP_ELSEWHERE_SECONDS = 20.0
"""How long `interrupt` / `rollback` waits for another worker to stop the thread's run."""
_STOP_ELSEWHERE_POLL = 0.05

Strategy = Literal["reject", "interrupt", "rollback", "enqueue"]
"""LangGraph's `multitask_strategy`: what a run does when its thread is busy."""
CancelAction = Literal["interrupt", "rollback"]
"""What cancelling a run does: stop it keeping its steps, or undo it and delete it."""


def run_request(spec: RunSpec) -> dict[str, Any]:
    """What a queued run is rebuilt from (JSON); the assistant and metadata are on its row."""
    return {
        "model_name": spec.model_name,
        "messages": messages_to_dict(list(spec.messages)),
        "stream_modes": list(spec.stream_modes),
        "durability": spec.durability,
        "recursion_limit": spec.recursion_limit,
        "command": None if spec.command is None else dict(spec.command),
        "checkpoint_id": spec.checkpoint_id,
        "stream_subgraphs": spec.stream_subgraphs,
        "resumable": spec.resumable,
        "user_id": spec.user_id,  # the authenticated caller (memory's namespace), kept as is
    }


def spec_from_request(
    record: RunRecord, request: dict[str, Any], hosted: Callable[[str, str | None], HostedAgent]
) -> RunSpec:
    """Rebuild a queued run's `RunSpec` from its row and its stored request."""
    model_name = request.get("model_name")
    return RunSpec(
        thread_id=record.thread_id,
        assistant_id=record.assistant_id,
        model_name=model_name,
        hosted=hosted(record.assistant_id, model_name),
        messages=messages_from_dict(request.get("messages") or []),
        stream_modes=list(request.get("stream_modes") or ()),
        durability=request.get("durability"),
        recursion_limit=request.get("recursion_limit"),
        metadata=record.metadata,
        command=request.get("command"),
        checkpoint_id=request.get("checkpoint_id"),
        stream_subgraphs=bool(request.get("stream_subgraphs")),
        resumable=bool(request.get("resumable")),
        user_id=request.get("user_id"),
    )


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Wait until `event` is set or `seconds` pass.

    Not `asyncio.wait_for`: on Python 3.11 it can swallow a cancellation that arrives as the
    event is set, and the dispatcher would then never stop.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class RunQueue:
    """Accepts runs (at once or queued), dispatches queued ones, and settles dead workers' runs.

    Args:
        manager: The run manager that executes runs in this process.
        hosted: The agent for an assistant id and run model (`AgentRegistry.get`).
        poll_seconds: How often the dispatcher looks for runs queued by other workers.
    """

    def __init__(
        self,
        manager: RunManager,
        hosted: Callable[[str, str | None], HostedAgent],
        *,
        poll_seconds: float = DEFAULT_QUEUE_POLL,
    ) -> None:
        self.manager = manager
        self.storage = manager.storage
        self.hosted = hosted
        self.poll_seconds = poll_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._started: dict[str, asyncio.Event] = {}
        self._subscribers: dict[str, list[tuple[EventBuffer, frozenset[str] | None]]] = {}
        self._chores: set[asyncio.Future[bool]] = set()
        self._accepting: dict[str, tuple[asyncio.Lock, int]] = {}
        self.worker_id = uuid.uuid4().hex
        """This worker's id in the requests it queues (`accepted_by`)."""
        self._deferred: dict[str, float] = {}
        self._claiming: set[str] = set()
        self._cancels_checked = float("-inf")
        manager.on_idle = self.wake

    # -- acceptance ------------------------------------------------------------------------------

    async def submit(
        self, spec: RunSpec, *, strategy: Strategy | None, stream: bool, waiter: bool = True
    ) -> ActiveRun | RunRecord:
        """Start the run now, or queue it (`enqueue` on a busy thread).

        `waiter`: the caller waits for the run here (`runs/wait`, `runs/stream`), so a queued
        run is left to this worker to start for a while (`claim_grace`).

        Returns:
            The started run, or the `pending` row of a queued one.

        Raises:
            BusyError: The thread is busy and the strategy is not `enqueue` (409).
        """
        async with self._accept_turn(spec.thread_id):
            if strategy in ("interrupt", "rollback"):
                await self.cancel_thread(spec.thread_id, strategy)
            try:
                return await self.manager.start(spec, stream=stream)
            except ThreadBusyError:
                if strategy != "enqueue":
                    raise
            return await traced_enqueue(functools.partial(self.enqueue, waiter=waiter), spec)

    @contextlib.asynccontextmanager
    async def _accept_turn(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's acceptance lock (one per thread, dropped when nobody waits)."""
        lock, users = self._accepting.get(thread_id, (asyncio.Lock(), 0))
        self._accepting[thread_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._accepting[thread_id]
            if users == 1:
                del self._accepting[thread_id]
                self.wake()  # the dispatcher skipped this thread meanwhile
            else:
                self._accepting[thread_id] = (lock, users - 1)

    async def enqueue(self, spec: RunSpec, *, waiter: bool = False) -> RunRecord:
        """Store the run `pending` and its input in the transcript; wake the dispatcher.

        With `waiter`, the request names this worker (`accepted_by`): another worker leaves the
        run to this one for `claim_grace` seconds, since the client waiting for it (its
        stream) is here.
        """
        if self.manager.closing:
            raise GatewayClosingError()
        run_id = str(uuid.uuid4())
        request = run_request(spec)
        if waiter:
            request["accepted_by"] = self.worker_id
        record = await self.storage.enqueue_run(
            spec.thread_id,
            run_id,
            spec.assistant_id,
            request,
            metadata=dict(spec.metadata or {}),
        )
        # Accepted means recorded: the input is in the transcript even if the run never runs.
        await TranscriptRecorder(self.storage, spec.thread_id, run_id).messages(spec.messages)
        self.wake()
        return record

    async def cancel_thread(self, thread_id: str, action: CancelAction) -> None:
        """Cancel the thread's pending runs and its running run, here or elsewhere (and wait).

        A run executing in another worker is asked to stop (`request_cancel`), then the
        pending runs are cancelled, then the run is waited for: that worker starts the
        thread's next pending run as soon as its run has stopped.

        Raises:
            BusyError: A compaction or a run another worker is starting holds the thread
                (nothing was cancelled), or the run did not stop in time: 409.
        """
        lock = await self.storage.get_thread_lock(thread_id)
        asked = None
        if lock is not None and lock.holder not in self.manager.active:
            if lock.kind != "run":
                raise BusyError(thread_id, f"a {lock.kind}", 1)
            asked = await self._ask_to_stop(thread_id, lock.holder, action)
        for record in await self.storage.thread_pending_runs(thread_id):
            await self.cancel_pending(record, action)
        if asked is not None:
            await self._wait_stopped(thread_id, asked)
        await self.manager.interrupt_thread(thread_id, rollback=action == "rollback")

    async def _ask_to_stop(self, thread_id: str, run_id: str, action: CancelAction) -> str | None:
        """Ask the worker executing `run_id` to stop it; `run_id`, or `None` if it ended.

        Raises:
            BusyError: The run holds the thread but is not `running` (claimed but not started
                yet): 409.
        """
        if await self.storage.request_cancel(run_id, action):
            return run_id
        lock = await self.storage.get_thread_lock(thread_id)
        if lock is not None and lock.holder == run_id:
            raise BusyError(thread_id, "a run in another gateway worker", 1)
        return None  # it ended meanwhile

    async def _wait_stopped(self, thread_id: str, run_id: str) -> None:
        """Wait until the run asked to stop let the thread go (`BusyError` after a while)."""
        deadline = asyncio.get_running_loop().time() + _STOP_ELSEWHERE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            lock = await self.storage.get_thread_lock(thread_id)
            if lock is None or lock.holder != run_id:
                return
            await asyncio.sleep(_STOP_ELSEWHERE_POLL)
        raise BusyError(thread_id, "a run in another gateway worker", 1)

    async def cancel_pending(self, record: RunRecord, action: CancelAction) -> bool:
        """Cancel a run that has not started: `interrupted`, or deleted for a rollback.

        Returns `False` if it had started meanwhile (then it is left alone).
        """
        if action == "rollback":
            done = await self.storage.delete_run(
                record.run_id, thread_id=record.thread_id, pending_only=True
            )
        else:
            done = await self.storage.cancel_pending_run(record.run_id, "cancelled before it ran")
        event = self._started.get(record.run_id)
        if event is not None:
            event.set()
        return done

    def drop_pending(self, record: RunRecord) -> None:
        """Cancel a pending run in the background (its streaming client went away)."""
        task = asyncio.ensure_future(self.cancel_pending(record, "interrupt"))
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    # -- dispatch --------------------------------------------------------------------------------

    def wake(self) -> None:
        """Look at the queue now (a run was queued, or ended here)."""
        self._wake.set()

    async def open(self) -> None:
        """At start-up: `recover`, then start the dispatcher task (the app's lifespan does)."""
        await self.recover()
        self.start()

    def start(self) -> None:
        """Start the dispatcher task."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="foldwise-run-queue")

    async def stop(self) -> None:
        """Stop the dispatcher task (queued runs stay queued for the next worker).

        A claim in progress is let finish (cancelled mid-way, a run already moved to `running`
        would never run); the task is cancelled only if it does not end in `_STOP_SECONDS`.
        """
        self._stopping = True
        self.wake()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=_STOP_SECONDS)
            if not done:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.dispatch()
                await self.stop_requested()
            except Exception:  # the dispatcher must outlive any one failure
                logger.exception("the run queue could not be dispatched; retrying")
            await _wait(self._wake, self.poll_seconds)

    @property
    def claim_grace(self) -> float:
        """Seconds another worker leaves a queued run to the worker where its client waits.

        Three polls, and at least a second: that worker's dispatcher looks at least once
        meanwhile, even on a busy machine; if it died, the run still starts, this much later.
        """
        return max(3 * self.poll_seconds, 1.0)

    def _leave_to_acceptor(self, run_id: str, request: dict[str, Any]) -> bool:
        """Whether to leave this queued run to the worker its waiting client is on, for now."""
        acceptor = request.get("accepted_by")
        if acceptor in (None, self.worker_id):
            return False
        now = asyncio.get_running_loop().time()
        first_seen = self._deferred.setdefault(run_id, now)
        if now - first_seen < self.claim_grace:
            return True
        del self._deferred[run_id]
        return False

    async def dispatch(self) -> int:
        """One look at the queue: start the next run of every free thread; return how many."""
        started = 0
        seen: set[str] = set()
        busy_here = {run.thread_id for run in self.manager.active.values()}
        await note_queue(self.storage)  # OpenTelemetry: the queue gauges (at most once a second)
        pending = await self.storage.pending_runs(limit=_DISPATCH_PAGE)
        claimable = {record.run_id for record in pending}
        for run_id in [r for r in self._deferred if r not in claimable]:
            del self._deferred[run_id]  # started elsewhere, or its thread is busy again
        for record in pending:
            if self._stopping:
                break
            if record.thread_id in seen or record.thread_id in busy_here:
                continue
            if record.thread_id in self._accepting:
                # A run is being accepted here: its stream subscribes once it is accepted.
                continue
            seen.add(record.thread_id)
            if await self._claim(record):
                started += 1
        return started

    async def stop_requested(self) -> int:
        """Cancel the runs here that another worker was asked to cancel; return how many.

        The cancel route of the worker a client reached leaves a request in the database
        (`request_cancel`) when the run executes elsewhere; the dispatcher looks at most
        once per `poll_seconds`, and only while runs execute here.
        """
        active = self.manager.active
        now = asyncio.get_running_loop().time()
        # Once per poll interval, not on every wake (a wake per run end would add a query
        # per run on a busy worker).
        if not active or now - self._cancels_checked < self.poll_seconds:
            return 0
        self._cancels_checked = now
        requests = await self.storage.take_cancel_requests(list(active))
        for run_id, action in requests.items():
            run = active.get(run_id)
            if run is not None:
                logger.info("run %s: cancelled (%s) from another worker", run_id, action)
                run.cancel(rollback=action == "rollback")
        return len(requests)

    async def _claim(self, record: RunRecord) -> bool:
        request = await self.storage.queued_request(record.run_id)
        if request is None:
            return False  # started or cancelled meanwhile
        if self._leave_to_acceptor(record.run_id, request):
            return False
        try:
            spec = spec_from_request(record, request, self.hosted)
        except Exception as error:
            logger.exception("queued run %s cannot be rebuilt", record.run_id)
            await self.storage.finish_run(record.run_id, "error", f"could not start: {error}")
            return False
        self._claiming.add(record.run_id)
        try:
            run = await self.manager.claim(spec, record.run_id)
        except ThreadNotFoundError:
            return False  # deleted with its thread
        finally:
            self._claiming.discard(record.run_id)
        if run is None:
            return False
        note_dequeued(run, record)
        for buffer, events in self._subscribers.pop(record.run_id, []):
            run.attach(buffer, events)  # before the run's task first runs: no event is missed
        event = self._started.get(record.run_id)
        if event is not None:
            event.set()
        return True

    # -- waiting for a queued run --------------------------------------------------------------

    def subscribe(self, run_id: str, buffer: EventBuffer, events: frozenset[str] | None) -> None:
        """Send a queued run's events to `buffer` from its first one, if it starts here."""
        self._subscribers.setdefault(run_id, []).append((buffer, events))

    def unsubscribe(self, run_id: str, buffer: EventBuffer) -> None:
        """Forget a subscription (the client went away, or the run started elsewhere)."""
        left = [(b, e) for b, e in self._subscribers.get(run_id, []) if b is not buffer]
        if left:
            self._subscribers[run_id] = left
        else:
            self._subscribers.pop(run_id, None)

    async def wait_started(self, run_id: str) -> ActiveRun | None:
        """Wait while the run is `pending`; return it if it runs here, else `None`."""
        event = self._started.setdefault(run_id, asyncio.Event())
        try:
            while True:
                active = self.manager.active.get(run_id)
                if active is not None:
                    return active
                record = await self.storage.get_run(run_id)
                starting_here = run_id in self._claiming  # `running` before it is `active`
                if not starting_here and (record is None or record.status != "pending"):
                    return self.manager.active.get(run_id)
                await _wait(event, self.poll_seconds)
        finally:
            self._started.pop(run_id, None)

    # -- runs of dead workers -------------------------------------------------------------------

    async def settle(self, record: RunRecord) -> RunRecord:
        """`record`, finished `error` if it says `running` but no worker runs it.

        A live run always holds its thread's lease (taken before it is `running`, released
        after it is finished), so a `running` row whose thread lease is not its own is a run
        whose worker died.
        """
        if record.status != "running" or record.run_id in self.manager.active:
            return record
        lock = await self.storage.get_thread_lock(record.thread_id)
        if lock is not None and lock.holder == record.run_id:
            return record  # another worker runs it (its lease lapses if that worker died)
        await self.storage.finish_run(record.run_id, "error", DEAD_WORKER)
        return await self.storage.get_run(record.run_id) or record

    async def recover(self) -> int:
        """At start-up: fail the runs of dead workers and free their threads.

        Every thread marked busy whose lease is free gets its `running` runs finished `error`
        and its status set back to idle; threads a live worker holds are left alone. Pending
        runs stay queued: the dispatcher starts them. Returns how many threads were recovered.
        """
        recovered = 0
        busy = await self.storage.search_threads(status="busy", limit=_RECOVER_PAGE)
        for thread in busy:
            try:
                async with self.manager.exclusive(thread.thread_id, "recover"):
                    waiting = await self.storage.thread_pending_runs(thread.thread_id)
                    status: ThreadStatus = "busy" if waiting else "idle"  # queued: busy
                    await self.storage.update_thread(thread.thread_id, status=status)
                    recovered += 1
            except (ThreadBusyError, ThreadNotFoundError):
                continue
        if recovered:
            logger.warning("recovered %d thread(s) left busy by a stopped worker", recovered)
        self.wake()
        return recovered
