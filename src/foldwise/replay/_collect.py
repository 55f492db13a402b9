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
    humans = _Humans(turns, turn_starts)
    seen_receipts: set[str] = set()
    offload_sizes: dict[str, int] = {}
    events = sorted(ctx.tap.events, key=lambda e: e.before_attempt)
    event_index = 0
    rejected = 0
    previous_blocks: list[tuple[int, int]] | None = None
    calls: list[CallRecord] = []
    for position, (snapshot, attempt) in enumerate(zip(snapshots, attempts, strict=False)):
        if attempt.rejected:
            rejected += 1
            continue
        call = len(calls)
        compactions: list[CompactionEvent] = []
        for receipt in system.receipts(snapshot.state):
            rid = str(receipt.get("id"))
            if rid in seen_receipts:
                continue
            seen_receipts.add(rid)
            report.receipts.append(receipt)
            compactions.append(_receipt_event(call, receipt))
        taps: list[SummaryEvent] = []
        while event_index < len(events) and events[event_index].before_attempt <= position:
            taps.append(events[event_index])
            event_index += 1
        if not system.uses_receipts:
            for mark, text in _summary_marks(snapshot):
                if mark not in seen_receipts:
                    seen_receipts.add(mark)
                    compactions.append(_summary_event(call, text, taps))
        grown = 0
        added = 0
        for key, size in system.offloads(snapshot.state).items():
            added += key not in offload_sizes
            grown += max(0, size - offload_sizes.get(key, 0))
            offload_sizes[key] = max(size, offload_sizes.get(key, 0))
        sent = humans.sent_before(position)
        texts = human_texts(snapshot.messages)
        verbatim = recoverable = 0
        for human_id, text in sent:
            if text in texts:
                verbatim += 1
            elif human_id in humans.recovered or system.recoverable(text, final_state, ctx):
                humans.recovered.add(human_id)
                recoverable += 1
        parts = measure_parts(snapshot, counter)
        exact = measure_parts(snapshot, exact_counter).total if exact_counter else None
        blocks = prefix_blocks(snapshot, exact_counter or counter)
        cached = cached_prefix(previous_blocks, blocks) if previous_blocks is not None else 0
        previous_blocks = blocks
        orphans, dangling = pairing_violations(snapshot.messages)
        calls.append(
            CallRecord(
                index=call,
                turn=humans.turn_of(position),
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
                cached_tokens=cached,
                humans=len(sent),
                humans_verbatim=verbatim,
                humans_recoverable=recoverable,
                orphan_results=orphans,
                dangling_calls=dangling,
                compactions=tuple(compactions),
                offloaded_bytes=grown,
                offloaded_count=added,
            )
        )
        rejected = 0
    report.calls = calls
    report.summary_calls = len(ctx.tap.events)
    report.summary_input_tokens = sum(e.input_tokens for e in ctx.tap.events)
    report.summary_output_tokens = sum(e.output_tokens for e in ctx.tap.events)
