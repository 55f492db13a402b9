"""Turn a replay run's recorded requests into `CallRecord`s."""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from foldwise.messages import message_text
from foldwise.replay._measure import (
    cached_prefix,
    human_texts,
    measure_parts,
    pairing_violations,
    prefix_blocks,
)
from foldwise.replay._probe import RequestSnapshot, SummaryEvent
from foldwise.replay._report import CallRecord, CompactionEvent, ReplayReport
from foldwise.tokens import TokenCounter

if TYPE_CHECKING:
    from foldwise.replay._driver import Turn
    from foldwise.replay._model import ProviderAttempt
    from foldwise.replay._systems import BuildContext, ReplaySystem

__all__ = ["collect_calls"]

logger = logging.getLogger(__name__)


def _receipt_event(call: int, receipt: dict[str, Any]) -> CompactionEvent:
    return CompactionEvent(
        call=call,
        trigger=str(receipt.get("trigger", "")),
        reason=str(receipt.get("reason", "")),
        tokens_before=receipt.get("tokens_before"),
        tokens_after=receipt.get("tokens_after"),
        messages_removed=int(receipt.get("messages_removed") or 0),
        messages_preserved=receipt.get("messages_preserved"),
        summary_chars=int(receipt.get("summary_chars") or 0),
    )


def _summary_marks(snapshot: RequestSnapshot) -> list[tuple[str, str]]:
    """`(mark, text)` of the peer summary messages in a request (LangChain, deepagents)."""
    marks: list[tuple[str, str]] = []
    for message in snapshot.messages:
        if message.additional_kwargs.get("lc_source") == "summarization":
            text = message_text(message)
            marks.append((message.id or hashlib.sha1(text.encode()).hexdigest(), text))
    return marks


def _summary_event(call: int, text: str, taps: Sequence[SummaryEvent]) -> CompactionEvent:
    if taps:
        tap = taps[-1]
        reason = f"summarized {tap.input_messages} messages ({tap.input_tokens:,} tokens)"
        removed = tap.input_messages
    else:
        # LangChain answers with a canned text when trimming left nothing to summarize.
        reason = f"no summarizer call; the summary reads: {text[-80:].strip()!r}"
        removed = 0
    return CompactionEvent(
        call=call,
        trigger="summary",
        reason=reason,
        tokens_before=None,
        tokens_after=None,
        messages_removed=removed,
        messages_preserved=None,
        summary_chars=len(text),
    )


class _Humans:
    """Which of the trace's human messages each request keeps, memoizing store look-ups."""

    def __init__(self, turns: Sequence[Turn], starts: Sequence[int]) -> None:
        self.turns = turns
        self.starts = list(starts)
        self.recovered: set[str] = set()

    def sent_before(self, attempt: int) -> list[tuple[str, str]]:
        turn = bisect.bisect_right(self.starts, attempt) - 1
        return [h for t in self.turns[: turn + 1] for h in t.humans]

    def turn_of(self, attempt: int) -> int:
        return max(0, bisect.bisect_right(self.starts, attempt) - 1)


class _Collector:
    """State carried from one request to the next while the calls are collected."""

    def __init__(
        self,
        report: ReplayReport,
        *,
        system: ReplaySystem,
        ctx: BuildContext,
        humans: _Humans,
        counter: TokenCounter,
        exact_counter: TokenCounter | None,
        final_state: dict[str, Any],
    ) -> None:
        self.report = report
        self.system = system
        self.ctx = ctx
        self.humans = humans
        self.counter = counter
        self.exact_counter = exact_counter
        self.final_state = final_state
        self.seen_receipts: set[str] = set()
        self.offload_sizes: dict[str, int] = {}
        self.events = sorted(ctx.tap.events, key=lambda e: e.before_attempt)
        self.event_index = 0
        self.previous_blocks: list[tuple[int, int]] | None = None

    def compactions(
        self, call: int, position: int, snapshot: RequestSnapshot
    ) -> list[CompactionEvent]:
        """The compactions first visible in this request: new receipts or peer summaries."""
        found: list[CompactionEvent] = []
        for receipt in self.system.receipts(snapshot.state):
            rid = str(receipt.get("id"))
            if rid in self.seen_receipts:
                continue
            self.seen_receipts.add(rid)
            self.report.receipts.append(receipt)
            found.append(_receipt_event(call, receipt))
        taps: list[SummaryEvent] = []
        events = self.events
        while (
            self.event_index < len(events) and events[self.event_index].before_attempt <= position
        ):
            taps.append(events[self.event_index])
            self.event_index += 1
        if not self.system.uses_receipts:
            for mark, text in _summary_marks(snapshot):
                if mark not in self.seen_receipts:
                    self.seen_receipts.add(mark)
                    found.append(_summary_event(call, text, taps))
        return found

    def offloads(self, snapshot: RequestSnapshot) -> tuple[int, int]:
        """`(bytes grown, artifacts added)` in the offload store since the previous request."""
        grown = added = 0
        for key, size in self.system.offloads(snapshot.state).items():
            added += key not in self.offload_sizes
            grown += max(0, size - self.offload_sizes.get(key, 0))
            self.offload_sizes[key] = max(size, self.offload_sizes.get(key, 0))
        return grown, added

    def human_counts(self, position: int, snapshot: RequestSnapshot) -> tuple[int, int, int]:
        """`(sent, verbatim, recoverable)` human messages as of this request."""
        sent = self.humans.sent_before(position)
        texts = human_texts(snapshot.messages)
        verbatim = recoverable = 0
        for human_id, text in sent:
            if text in texts:
                verbatim += 1
            elif human_id in self.humans.recovered or self.system.recoverable(
                text, self.final_state, self.ctx
            ):
                self.humans.recovered.add(human_id)
                recoverable += 1
        return len(sent), verbatim, recoverable

    def record(
        self,
        call: int,
        position: int,
        snapshot: RequestSnapshot,
        attempt: ProviderAttempt,
        *,
        rejected: int,
    ) -> CallRecord:
        """The `CallRecord` of one accepted request, after `rejected` refused attempts."""
        compactions = self.compactions(call, position, snapshot)
        grown, added = self.offloads(snapshot)
        sent, verbatim, recoverable = self.human_counts(position, snapshot)
        parts = measure_parts(snapshot, self.counter)
        exact = measure_parts(snapshot, self.exact_counter).total if self.exact_counter else None
        blocks = prefix_blocks(snapshot, self.exact_counter or self.counter)
        previous, self.previous_blocks = self.previous_blocks, blocks
        orphans, dangling = pairing_violations(snapshot.messages)
        return CallRecord(
            index=call,
            turn=self.humans.turn_of(position),
            tokens=parts.total,
            system_tokens=parts.system,
            tool_tokens=parts.tools,
            durable_tokens=parts.durable,
            message_tokens=parts.messages,
            exact_tokens=exact,
            provider_tokens=attempt.tokens,
            messages=len(snapshot.messages),
            rejected=rejected,
            failed=attempt.forced,
            synthetic=attempt.synthetic,
            cached_tokens=cached_prefix(previous, blocks) if previous is not None else 0,
            humans=sent,
            humans_verbatim=verbatim,
            humans_recoverable=recoverable,
            orphan_results=orphans,
            dangling_calls=dangling,
            compactions=tuple(compactions),
            offloaded_bytes=grown,
            offloaded_count=added,
        )


def collect_calls(
    report: ReplayReport,
    *,
    system: ReplaySystem,
    ctx: BuildContext,
    turns: Sequence[Turn],
    turn_starts: Sequence[int],
    counter: TokenCounter,
    exact_counter: TokenCounter | None,
    final_state: dict[str, Any],
) -> None:
    """Fill `report.calls`, receipts and summary totals from the probe, model and tap.

    Recoverability is checked against `final_state`: stores only grow during a replay, and a
    peer may write its archive in the same step that removes the messages.
    """
    snapshots = ctx.probe.snapshots
    attempts = ctx.model.attempts
    if len(snapshots) != len(attempts):
        logger.warning(
            "replay: %d requests recorded but the model saw %d", len(snapshots), len(attempts)
        )
    collector = _Collector(
        report,
        system=system,
        ctx=ctx,
        humans=_Humans(turns, turn_starts),
        counter=counter,
        exact_counter=exact_counter,
        final_state=final_state,
    )
    rejected = 0
    calls: list[CallRecord] = []
    for position, (snapshot, attempt) in enumerate(zip(snapshots, attempts, strict=False)):
        if attempt.rejected:
            rejected += 1
            continue
        calls.append(collector.record(len(calls), position, snapshot, attempt, rejected=rejected))
        rejected = 0
    report.calls = calls
    report.summary_calls = len(ctx.tap.events)
    report.summary_input_tokens = sum(e.input_tokens for e in ctx.tap.events)
    report.summary_output_tokens = sum(e.output_tokens for e in ctx.tap.events)
