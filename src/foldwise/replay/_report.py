"""What a replay measured: one `CallRecord` per model call, summed up in a `ReplayReport`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CallRecord", "CompactionEvent", "ReplayReport"]


@dataclass(frozen=True)
class CompactionEvent:
    """One compaction, from a foldwise receipt or a peer's summarizer call.

    Attributes:
        call: Index of the model call it preceded.
        trigger: foldwise's trigger (`tokens`, `budget`, `overflow`...); `summary` for peers.
        reason: The receipt's one-line reason (peers: what the summarizer was given).
        tokens_before: The system's own estimate before (foldwise receipts only).
        tokens_after: The system's own estimate after (foldwise receipts only).
        messages_removed: Messages folded into the summary (peers: the summarizer's input).
        messages_preserved: Messages kept verbatim (foldwise receipts only).
        summary_chars: Size of the summary.
    """

    call: int
    trigger: str
    reason: str
    tokens_before: int | None
    tokens_after: int | None
    messages_removed: int
    messages_preserved: int | None
    summary_chars: int


@dataclass(frozen=True)
class CallRecord:
    """One model call of the replay: the request the recorded answer was given to.

    Token counts use the report's counter (the configured one); `exact_tokens` is the exact
    `o200k_base` count when the replay ran with `exact=True`.

    Attributes:
        index: Position of the call (the recorded assistant message it replays).
        turn: The human turn it belongs to.
        tokens: The whole request.
        system_tokens: The system prompt (and any other system message).
        tool_tokens: Tool schemas.
        durable_tokens: The durable data block and its contract (peers: their summary message).
        message_tokens: The conversation messages.
        exact_tokens: Exact count, when requested.
        provider_tokens: What the fake provider counted (it rejects above its window).
        messages: Messages in the request.
        rejected: Requests refused for overflow before this one went through.
        failed: The system did not recover from an overflow: in production the run would have
            failed here (the replay forced the request through to go on).
        synthetic: The trace recorded no answer here (an empty one was made up).
        cached_tokens: Tokens of the leading part identical to the previous request (M3).
        humans: Human messages of the trace sent so far.
        humans_verbatim: How many of them are verbatim in this request.
        humans_recoverable: How many of the others can be read back from the system's store.
        orphan_results: Tool results in the request whose call is not in it.
        dangling_calls: Tool calls in the request without their result.
        compactions: Compactions that happened just before this call.
        offloaded_bytes: Bytes newly written to the system's store before this call.
        offloaded_count: Artifacts newly written before this call.
    """

    index: int
    turn: int
    tokens: int
    system_tokens: int
    tool_tokens: int
    durable_tokens: int
    message_tokens: int
    exact_tokens: int | None
    provider_tokens: int
    messages: int
    rejected: int = 0
    failed: bool = False
    synthetic: bool = False
    cached_tokens: int = 0
    humans: int = 0
    humans_verbatim: int = 0
    humans_recoverable: int = 0
    orphan_results: int = 0
    dangling_calls: int = 0
    compactions: tuple[CompactionEvent, ...] = ()
    offloaded_bytes: int = 0
    offloaded_count: int = 0

    @property
    def measured(self) -> int:
        """The headline size: exact when measured, else the configured counter's."""
        return self.exact_tokens if self.exact_tokens is not None else self.tokens


@dataclass
class ReplayReport:
    """The replay of one trace through one system.

    Attributes:
        system: The system key (`foldwise`, `langchain`...).
        label: Its display name.
        description: Its configuration in one line.
        trace: The trace's name.
        counter: The counter of the per-part numbers.
        exact: Whether `exact_tokens` were measured (`o200k_base`).
        provider_counter: The fake provider's counter.
        window: The provider's window (`None`: unbounded).
        calls: One record per model call.
        receipts: foldwise's compaction receipts, as dicts.
        summary_input_tokens: Tokens read by the summarizer, over the whole run.
        summary_output_tokens: Tokens it wrote.
        summary_calls: How many summaries were written.
        duration_seconds: Wall time of the replay.
        error: Why the replay stopped early, if it did.
        note: Why the system did not run (a missing package), if it did not.
        warnings: Oddities of the trace or the run.
        extras: Results of extra analyzers (benchmarks), JSON-ready.
    """

    system: str
    label: str
    description: str
    trace: str
    counter: str
    exact: bool
    provider_counter: str
    window: int | None
    calls: list[CallRecord] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_calls: int = 0
    duration_seconds: float = 0.0
    error: str | None = None
    note: str | None = None
    warnings: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        """Whether the system ran at all."""
        return self.note is None

    @property
    def real_calls(self) -> list[CallRecord]:
        """Calls that replay a recorded answer (made-up ones excluded)."""
        return [c for c in self.calls if not c.synthetic]

    @property
    def total_tokens(self) -> int:
        """Prompt tokens over all calls (rejected requests not included)."""
        return sum(c.measured for c in self.real_calls)

    @property
    def peak_tokens(self) -> int:
        """The largest request."""
        return max((c.measured for c in self.real_calls), default=0)

    @property
    def compactions(self) -> list[CompactionEvent]:
        """Every compaction, in order."""
        return [e for c in self.calls for e in c.compactions]

    @property
    def compaction_count(self) -> int:
        """How many compactions happened."""
        return len(self.compactions)

    @property
    def rejections(self) -> int:
        """Requests the provider refused for overflow (M1)."""
        return sum(c.rejected for c in self.calls)

    @property
    def failures(self) -> int:
        """Calls at which the run would have failed (overflow not recovered)."""
        return sum(c.failed for c in self.real_calls)

    @property
    def offloaded_bytes(self) -> int:
        """Bytes the system stored outside the context."""
        return sum(c.offloaded_bytes for c in self.calls)

    @property
    def offloaded_count(self) -> int:
        """Artifacts the system stored outside the context."""
        return sum(c.offloaded_count for c in self.calls)

    def _human_share(self, recoverable: bool) -> float:
        total = sum(c.humans for c in self.real_calls)
        if total == 0:
            return 1.0
        kept = sum(
            c.humans_verbatim + (c.humans_recoverable if recoverable else 0)
            for c in self.real_calls
        )
        return kept / total

    @property
    def human_verbatim(self) -> float:
        """Share of (call, earlier human message) pairs where it was sent verbatim."""
        return self._human_share(recoverable=False)

    @property
    def human_kept(self) -> float:
        """Share of those pairs where it was verbatim or recoverable from the store."""
        return self._human_share(recoverable=True)

    @property
    def orphans(self) -> int:
        """Tool results without their call, and calls without their result, over all requests."""
        return sum(c.orphan_results + c.dangling_calls for c in self.calls)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens identical to the previous request's leading part (cacheable)."""
        return sum(c.cached_tokens for c in self.real_calls)

    def summary(self) -> dict[str, Any]:
        """The headline numbers."""
        return {
            "system": self.system,
            "label": self.label,
            "available": self.available,
            "calls": len(self.real_calls),
            "compactions": self.compaction_count,
            "peak_tokens": self.peak_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
            "overflow_rejections": self.rejections,
            "failed_calls": self.failures,
            "human_verbatim": round(self.human_verbatim, 4),
            "human_verbatim_or_recoverable": round(self.human_kept, 4),
            "offloaded_bytes": self.offloaded_bytes,
            "offloaded_artifacts": self.offloaded_count,
            "orphan_tool_messages": self.orphans,
            "summary_calls": self.summary_calls,
            "summary_input_tokens": self.summary_input_tokens,
            "summary_output_tokens": self.summary_output_tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: configuration, headline numbers, every call and receipt."""
        return {
            "system": self.system,
            "label": self.label,
            "description": self.description,
            "trace": self.trace,
            "counter": self.counter,
            "exact": self.exact,
            "provider_counter": self.provider_counter,
            "window": self.window,
            "duration_seconds": round(self.duration_seconds, 3),
            "error": self.error,
            "note": self.note,
            "warnings": list(self.warnings),
            "summary": self.summary(),
            "calls": [asdict(c) for c in self.calls],
            "receipts": list(self.receipts),
            "extras": dict(self.extras),
        }
