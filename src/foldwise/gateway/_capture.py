"""`TranscriptRecorder`: write every visible message and compaction to the transcript as it happens.

The transcript is fed from the run's input and from the state values the run streams, never
from reading a checkpoint afterwards: a message appended here stays, whatever a later
compaction removes from the thread state. Each message is stored once (by id); compaction
receipts go to the receipts table together with a marker event in the transcript, in one
transaction, in the order they happened relative to the messages.

The checkpoint and these tables are written in separate transactions, so a process killed
between the two leaves a message or a receipt in the thread state only. `reconcile` repairs
that when the next run or compaction of the thread starts: it compares the state with the
transcript and receipts tables (never with what the state says was seen) and writes what is
missing, receipts (with their markers) first, then messages in state order, before anything of
the new run. Recovered entries carry the run id of the receipt when it names one, else none.

The other way round matters too: LangGraph streams a step's values before it saves the step's
checkpoint, so a receipt recorded as soon as it streams could name a compaction that a crash
then loses from the state (a marker and a receipt for a summary the thread never got).
`committed_values` therefore holds a streamed state back until the thread's checkpoint holds
its new receipts; one the checkpoint never shows is left to `reconcile`. A run with durability
"exit" saves no checkpoint before it ends: from its first new receipt on, its streamed states are
recorded in order once the run's stream has ended (`record_values`), not waited for.

"The checkpoint holds" means the checkpoint itself (`checkpoint_values`): LangGraph's live
`aget_state` adds the writes of tasks that finished after it, and a run started with new input
discards exactly those, so a message or receipt read there may never be part of the thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise._crash import crash_point
from foldwise.gateway._leases import Lease
from foldwise.gateway._messages import message_record, visible
from foldwise.gateway.storage import GatewayStorage, TranscriptEvent, validate_run_id

__all__ = [
    "TranscriptRecorder",
    "checkpoint_snapshot",
    "committed_values",
    "compaction_marker",
    "latest_summary",
    "record_values",
]

logger = logging.getLogger(__name__)

_RECEIPT_PAGE = 1000
COMMIT_WAIT_SECONDS = 10.0
"""How long a streamed receipt waits for the checkpoint that holds it."""
_COMMIT_POLL_SECONDS = 0.01


def compaction_marker(
    receipt: Mapping[str, Any], run_id: str | None, summary_text: str | None = None
) -> TranscriptEvent:
    """The transcript event that marks a compaction between the messages around it.

    Args:
        receipt: The compaction's receipt (`CompactionReceipt.to_dict()`).
        run_id: The run that compacted.
        summary_text: The summary this compaction produced (the thread's `summary_text`
            right after it), when known; markers written without it serve `null`.
    """
    summary = {
        "type": "compaction",
        "receipt_id": receipt.get("id"),
        "manual": bool(receipt.get("manual")),
        "trigger": receipt.get("trigger"),
        "reason": receipt.get("reason"),
        "tokens_before": receipt.get("tokens_before"),
        "tokens_after": receipt.get("tokens_after"),
        "messages_removed": receipt.get("messages_removed"),
        "messages_preserved": receipt.get("messages_preserved"),
        "messages_rescued": receipt.get("messages_rescued"),
        "summary_chars": receipt.get("summary_chars"),
        "model_used": receipt.get("model_used"),
        "attempts": receipt.get("attempts"),
        "duration_ms": receipt.get("duration_ms"),
        "precomputed": bool(receipt.get("precomputed")),
        "archive_id": receipt.get("archive_id"),
        "metric": receipt.get("metric"),
        "threshold": receipt.get("threshold"),
        "created_at": receipt.get("created_at"),
        "summary": summary_text if isinstance(summary_text, str) else None,
    }
    receipt_id = receipt.get("id")
    return TranscriptEvent(
        kind="compaction",
        message=summary,
        run_id=run_id,
        message_id=f"compaction:{receipt_id}" if isinstance(receipt_id, str) else None,
    )


class TranscriptRecorder:
    """Appends what one run (or compaction) produces to a thread's transcript.

    Args:
        storage: The gateway storage.
        thread_id: The thread.
        run_id: The run that produces the events.
        known_messages: Ids already in the thread (not appended again).
        known_receipts: Receipt ids already recorded.
    """

    def __init__(
        self,
        storage: GatewayStorage,
        thread_id: str,
        run_id: str | None,
        *,
        known_messages: Iterable[str] = (),
        known_receipts: Iterable[str] = (),
    ) -> None:
        self.storage = storage
        self.thread_id = thread_id
        self.run_id = run_id
        self.known_messages: set[str] = set(known_messages)
        self.known_receipts: set[str] = set(known_receipts)
        self.lease: Lease | None = None
        """When set, every write first checks that the lease is still held (fencing)."""

    async def _fence(self) -> None:
        # A worker that lost its lease must not append to a transcript the new holder writes.
        if self.lease is not None:
            await self.lease.verify()

    @classmethod
    def from_values(
        cls,
        storage: GatewayStorage,
        thread_id: str,
        run_id: str | None,
        values: Mapping[str, Any],
    ) -> TranscriptRecorder:
        """A recorder that treats everything in `values` (a state snapshot) as already seen."""
        messages = values.get("messages") or []
        receipts = values.get("compactions") or []
        return cls(
            storage,
            thread_id,
            run_id,
            known_messages=(str(m.id) for m in messages if getattr(m, "id", None)),
            known_receipts=(str(r.get("id")) for r in receipts if isinstance(r, Mapping)),
        )

    def _fresh(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        return [m for m in messages if m.id is not None and str(m.id) not in self.known_messages]

    @staticmethod
    def _events(messages: Sequence[BaseMessage], run_id: str | None) -> list[TranscriptEvent]:
        return [
            TranscriptEvent(
                kind="message", message=message_record(m), run_id=run_id, message_id=str(m.id)
            )
            for m in visible(messages)
            if m.id is not None
        ]

    async def messages(self, messages: Sequence[BaseMessage]) -> int:
        """Append the visible messages not seen yet; return how many were new."""
        fresh = self._fresh(messages)
        if not fresh:
            return 0
        events = self._events(fresh, self.run_id)
        if events:
            await self._fence()
            crash_point("transcript.before")  # tests only
            await self.storage.append_transcript(self.thread_id, events)
            crash_point("transcript.after")  # tests only
        self.known_messages.update(str(m.id) for m in fresh)
        return len(events)

    async def receipt(self, receipt: Mapping[str, Any], summary_text: str | None = None) -> bool:
        """Store a compaction receipt and its marker once; return whether it was new.

        `summary_text` is the summary the compaction produced, recorded in the marker.
        """
        receipt_id = receipt.get("id")
        if not isinstance(receipt_id, str) or receipt_id in self.known_receipts:
            return False
        await self._store_receipt(receipt, self.run_id, summary_text)
        return True

    async def _store_receipt(
        self, receipt: Mapping[str, Any], run_id: str | None, summary_text: str | None
    ) -> None:
        await self._fence()
        marker = compaction_marker(receipt, run_id, summary_text)
        await self.storage.add_receipt(self.thread_id, dict(receipt), run_id=run_id, marker=marker)
        self.known_receipts.add(str(receipt.get("id")))

    async def _stored_receipt_ids(self) -> set[str]:
        ids: set[str] = set()
        offset = 0
        while True:
            page = await self.storage.list_receipts(
                self.thread_id, limit=_RECEIPT_PAGE, offset=offset
            )
            ids.update(str(r.receipt.get("id")) for r in page)
            if len(page) < _RECEIPT_PAGE:
                return ids
            offset += len(page)

    async def reconcile(self, values: Mapping[str, Any], inputs: Sequence[BaseMessage] = ()) -> int:
        """Write what the state holds and the tables lack, then `inputs`; return how many.

        Receipts of `values["compactions"]` missing from the receipts table are stored with
        their markers (the storage skips a receipt id it has); then the visible messages of
        `values` missing from the transcript and the new `inputs` are appended in one
        transaction (the storage skips message ids it has), state messages first.

        Args:
            values: The thread state at the start of a run or compaction.
            inputs: The new run's input messages, recorded under the recorder's run.

        Returns:
            How many receipts and messages of `values` were missing (0 without a crash).
        """
        receipts = [r for r in values.get("compactions") or [] if isinstance(r, Mapping)]
        recovered = 0
        if receipts:
            stored = await self._stored_receipt_ids()
            for receipt in receipts:
                if isinstance(receipt.get("id"), str) and receipt["id"] not in stored:
                    run_id = _run_id_or_none(receipt.get("run_id"))
                    summary = latest_summary(values, receipt)
                    await self._store_receipt(receipt, run_id, summary)
                    recovered += 1
        state = [m for m in values.get("messages") or [] if isinstance(m, BaseMessage)]
        ids = {str(m.id) for m in state if m.id is not None}
        # Ask which are stored before rendering any: a turn renders what is new, not history.
        shown = [str(m.id) for m in visible(state) if m.id is not None]
        stored = await self.storage.stored_message_ids(self.thread_id, shown) if shown else set()
        missing = [m for m in state if m.id is not None and str(m.id) not in stored]
        events = self._events(missing, None) + self._events(self._fresh(inputs), self.run_id)
        if events:
            crash_point("transcript.before")  # tests only
            written = await self.storage.append_transcript(self.thread_id, events)
            crash_point("transcript.after")  # tests only
            recovered += sum(1 for e in written if e.message_id in ids)
        self.known_messages.update(ids)
        self.known_messages.update(str(m.id) for m in inputs if m.id is not None)
        self.known_receipts.update(str(r.get("id")) for r in receipts)
        if recovered:
            logger.warning(
                "thread %s: recorded %d message(s)/receipt(s) a crash had kept out of the "
                "transcript",
                self.thread_id,
                recovered,
            )
        return recovered

    async def values(self, values: Mapping[str, Any]) -> None:
        """Record a streamed state: new receipts first (they happened before), then messages."""
        for receipt in values.get("compactions") or []:
            if isinstance(receipt, Mapping) and receipt.get("id") not in self.known_receipts:
                crash_point("receipt.auto.before")  # tests only
                if await self.receipt(receipt, latest_summary(values, receipt)):
                    crash_point("receipt.auto.after")  # tests only
        messages = values.get("messages") or []
        await self.messages([m for m in messages if isinstance(m, BaseMessage)])


def latest_summary(values: Mapping[str, Any], receipt: Mapping[str, Any]) -> str | None:
    """The summary `receipt`'s compaction produced, if `values` shows it; else `None`.

    A compaction writes its receipt and the new `summary_text` in one state update, so the
    state's summary is that of its newest receipt (the last of `compactions`); an older
    receipt's summary has been replaced since.
    """
    receipts = values.get("compactions") or []
    summary = values.get("summary_text")
    if not receipts or not isinstance(summary, str) or not isinstance(receipts[-1], Mapping):
        return None
    return summary if receipts[-1].get("id") == receipt.get("id") else None


def _run_id_or_none(value: Any) -> str | None:
    """`value` if it is a valid run id (a receipt's `run_id`), else `None`."""
    if value is None:
        return None
    try:
        return validate_run_id(value)
    except ValueError:
        return None


def _receipt_ids(values: Mapping[str, Any]) -> set[str]:
    return {
        str(r.get("id"))
        for r in values.get("compactions") or []
        if isinstance(r, Mapping) and isinstance(r.get("id"), str)
    }


async def record_values(
    graph: Any,
    recorder: TranscriptRecorder,
    values: Mapping[str, Any],
    held: list[Mapping[str, Any]] | None = None,
) -> None:
    """Record a streamed state once its checkpoint holds its new receipts (`committed_values`).

    With `held` (a run that saves its checkpoint only when it ends: durability "exit"), the
    states from the first one with a new receipt on are appended to it instead, for the run
    to record with this function once its stream has ended.
    """
    if held is not None and (held or _receipt_ids(values) - recorder.known_receipts):
        held.append(values)
        return
    await recorder.values(await committed_values(graph, recorder, values))


async def committed_values(
    graph: Any,
    recorder: TranscriptRecorder,
    values: Mapping[str, Any],
    *,
    wait_seconds: float = COMMIT_WAIT_SECONDS,
) -> Mapping[str, Any]:
    """`values` once the thread's checkpoint holds its new receipts (see the module docstring).

    Returns `values` itself when it adds no receipt or the checkpoint holds them all; else
    (the checkpoint did not show one within `wait_seconds`) `values` without the missing
    receipts, which `reconcile` records at the next run if the checkpoint has them by then.
    """
    fresh = _receipt_ids(values) - recorder.known_receipts
    if not fresh:
        return values
    config = {"configurable": {"thread_id": recorder.thread_id}}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        held = _receipt_ids((await checkpoint_snapshot(graph, config)).values or {})
        if fresh <= held:
            return values
        if loop.time() >= deadline:
            break
        await asyncio.sleep(_COMMIT_POLL_SECONDS)
    logger.warning(
        "thread %s: compaction receipt(s) %s never reached the checkpoint; not recorded",
        recorder.thread_id,
        sorted(fresh - held),
    )
    kept = [
        r
        for r in values.get("compactions") or []
        if not (isinstance(r, Mapping) and r.get("id") in fresh - held)
    ]
    return {**values, "compactions": kept}


async def checkpoint_snapshot(graph: Any, config: Mapping[str, Any]) -> Any:
    """The thread's head as its checkpoint holds it, without the writes of finished tasks.

    LangGraph's live `aget_state` applies the writes of the tasks that finished after the head
    checkpoint was saved (a process killed before the next checkpoint leaves them); a run
    started with new input discards those writes. Reading the head checkpoint by id gives the
    state such a run continues from.
    """
    head = await graph.aget_state(config)
    checkpoint_id = ((getattr(head, "config", None) or {}).get("configurable") or {}).get(
        "checkpoint_id"
    )
    if checkpoint_id is None or not getattr(head, "tasks", ()):
        return head
    configurable = {**(config.get("configurable") or {}), "checkpoint_id": checkpoint_id}
    return await graph.aget_state({**config, "configurable": configurable})
