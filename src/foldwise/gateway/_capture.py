"""`TranscriptRecorder`: write every visible message and compaction to the transcript as it happens.

The transcript is fed from the run's input and from the state values the run streams, never
from reading a checkpoint afterwards: a message appended here stays, whatever a later
compaction removes from the thread state. Each message is stored once (by id); compaction
receipts go to the receipts table together with a marker event in the transcript, in one
transaction, in the order they happened relative to the messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise.gateway._messages import message_record, visible
from foldwise.gateway.storage import GatewayStorage, TranscriptEvent

__all__ = ["TranscriptRecorder", "compaction_marker"]


def compaction_marker(receipt: Mapping[str, Any], run_id: str | None) -> TranscriptEvent:
    """The transcript event that marks a compaction between the messages around it."""
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
        "summary_chars": receipt.get("summary_chars"),
        "model_used": receipt.get("model_used"),
        "created_at": receipt.get("created_at"),
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

    async def messages(self, messages: Sequence[BaseMessage]) -> int:
        """Append the visible messages not seen yet; return how many were new."""
        fresh = [m for m in messages if m.id is not None and str(m.id) not in self.known_messages]
        if not fresh:
            return 0
        events = [
            TranscriptEvent(
                kind="message", message=message_record(m), run_id=self.run_id, message_id=str(m.id)
            )
            for m in visible(fresh)
        ]
        if events:
            await self.storage.append_transcript(self.thread_id, events)
        self.known_messages.update(str(m.id) for m in fresh)
        return len(events)

    async def receipt(self, receipt: Mapping[str, Any]) -> bool:
        """Store a compaction receipt and its marker once; return whether it was new."""
        receipt_id = receipt.get("id")
        if not isinstance(receipt_id, str) or receipt_id in self.known_receipts:
            return False
        await self.storage.add_receipt(
            self.thread_id,
            dict(receipt),
            run_id=self.run_id,
            marker=compaction_marker(receipt, self.run_id),
        )
        self.known_receipts.add(receipt_id)
        return True

    async def values(self, values: Mapping[str, Any]) -> None:
        """Record a streamed state: new receipts first (they happened before), then messages."""
        for receipt in values.get("compactions") or []:
            if isinstance(receipt, Mapping):
                await self.receipt(receipt)
        messages = values.get("messages") or []
        await self.messages([m for m in messages if isinstance(m, BaseMessage)])
