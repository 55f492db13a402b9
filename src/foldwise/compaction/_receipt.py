"""`CompactionReceipt`: the durable record of one compaction."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_RECEIPTS", "CompactionReceipt", "SummaryAttempt", "append_receipts"]

MAX_RECEIPTS = 50
"""How many receipts the `compactions` state channel keeps (newest)."""


class SummaryAttempt(BaseModel):
    """One summarizer candidate tried during a compaction."""

    model_config = ConfigDict(frozen=True)

    model: str
    """The candidate's model name."""
    ok: bool
    """Whether it produced a valid summary."""
    error: str | None = None
    """Why it failed, if it did."""
    duration_ms: float = 0.0
    """How long the attempt took."""


class CompactionReceipt(BaseModel):
    """What one compaction did; logged, stored in state, served by the gateway."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: f"cmp_{uuid.uuid4().hex[:16]}")
    """Receipt id."""
    thread_id: str | None = None
    """The thread compacted, when known."""
    run_id: str | None = None
    """The run during which it happened (automatic compactions)."""
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the compaction was committed (UTC)."""
    manual: bool = False
    """Manual (`/compact`, `acompact_thread`) or automatic."""
    trigger: str
    """`tokens`, `messages`, `fraction`, `budget`, `overflow` or `manual`."""
    reason: str
    """One line naming the clause that fired and its metric."""
    metric: int = 0
    """The measured value that fired."""
    threshold: int | None = None
    """The limit it was compared with."""
    tokens_before: int
    """Estimated tokens of the next request before."""
    tokens_after: int
    """Estimated tokens of the next request after."""
    messages_removed: int
    """Messages folded into the summary."""
    messages_preserved: int
    """Messages kept verbatim."""
    messages_rescued: int
    """Messages moved from the summarized span to the kept side (user input, reminders)."""
    summary_chars: int
    """Size of the new summary."""
    model_used: str
    """The summarizer that produced it."""
    attempts: list[SummaryAttempt] = Field(default_factory=list)
    """Every candidate tried, in order, with its error."""
    duration_ms: float = 0.0
    """Wall time of the whole compaction."""
    offloaded_ids: list[str] = Field(default_factory=list)
    """Artifacts written during this compaction (verbatim user input over budget)."""
    archive_id: str | None = None
    """The artifact holding the removed messages verbatim, when archiving is on."""
    precomputed: bool = False
    """The summary was made in the background before the compaction fired (same span, same
    prior summary, same settings); receipts written before this field read as `false`."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for state channels, storage and HTTP)."""
        return self.model_dump(mode="json")

    def log_line(self) -> str:
        """The one-line INFO log form."""
        return (
            f"compaction {self.id} thread={self.thread_id} {'manual' if self.manual else 'auto'} "
            f"trigger={self.trigger} tokens {self.tokens_before}->{self.tokens_after} "
            f"removed={self.messages_removed} preserved={self.messages_preserved} "
            f"rescued={self.messages_rescued} summary_chars={self.summary_chars} "
            f"model={self.model_used} attempts={len(self.attempts)} "
            f"precomputed={str(self.precomputed).lower()} "
            f"duration_ms={self.duration_ms:.0f} reason={self.reason!r}"
        )


def append_receipts(
    existing: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """State reducer for `compactions`: append by id, keep the newest `MAX_RECEIPTS`."""
    merged = list(existing or [])
    seen = {r.get("id") for r in merged}
    for receipt in new or []:
        if receipt.get("id") not in seen:
            merged.append(receipt)
            seen.add(receipt.get("id"))
    return merged[-MAX_RECEIPTS:]
