"""The pure compaction planner: when to compact, where to cut, what to keep verbatim."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ParamSpec

from langchain_core.messages import BaseMessage

from foldwise.compaction._cuts import (
    Counts,
    LazyCounts,
    NewestExchange,
    cut_upper_bound,
    latest_user_index,
    newest_exchange,
    safe_cut,
    tail_start_for_tokens,
)
from foldwise.compaction._policy import CompactionPolicy
from foldwise.compaction._split import (
    Split,
    demote_for_budget,
    human_overflow,
    oversized_results,
    split_at,
)
from foldwise.durable import summary_for_context
from foldwise.messages import ToolPairing, analyze_tool_pairing, validate_messages

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = [
    "CompactionDecision",
    "CompactionPlan",
    "SkipReason",
    "decide_compaction",
    "plan_compaction",
]

P = ParamSpec("P")


class SkipReason(StrEnum):
    """Why a compaction was not planned; each case is distinct (unlike DeerFlow's one reason)."""

    NOT_ENOUGH_MESSAGES = "not_enough_messages"
    BELOW_THRESHOLD = "below_threshold"
    EVERYTHING_RESCUED = "everything_rescued"
    GAIN_TOO_SMALL = "gain_below_minimum"


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction will do.

    Attributes:
        to_summarize: Messages removed from the context (their content goes into the summary).
        preserved: The new message list, in order: rescued messages, then the kept tail.
        summary_input: What the summarizer reads: the whole summarized span, including the
            human messages that are also preserved verbatim (context for the summary).
        rescued_ids: Ids of messages moved from the summarized span to the preserved side.
        human_overflow_ids: Preserved human messages beyond `preserve_human.max_tokens`, oldest
            first; a caller with an artifact store offloads them verbatim.
        trigger: `tokens`, `messages`, `fraction`, `budget` or `manual`.
        reason: One line naming the clause that fired and its metric.
        metric: The measured value that fired (tokens or messages).
        threshold: The limit it was compared with, if any.
        tokens_before: Estimated tokens of the next request before compaction.
        estimated_tokens_after: Estimated tokens of the next request after compaction.
        cutoff: Index of the first kept message of the tail.
        tail_over_budget: The kept messages, the static part and the summary allowance
            (`policy.summary_max_tokens`) do not fit the budget (offload is needed).
        oversized_tail_ids: When `tail_over_budget`, the tool results of the newest exchange
            (the last AIMessage with tool calls and its results, at the end), largest first.
            The planner never summarizes them (the model would re-issue the call); the caller
            clips or offloads them in the request view, largest first, until it fits.
    """

    to_summarize: tuple[BaseMessage, ...]
    preserved: tuple[BaseMessage, ...]
    summary_input: tuple[BaseMessage, ...]
    rescued_ids: tuple[str, ...]
    human_overflow_ids: tuple[str, ...]
    trigger: str
    reason: str
    metric: int
    threshold: int | None
    tokens_before: int
    estimated_tokens_after: int
    cutoff: int
    tail_over_budget: bool = False
    oversized_tail_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactionDecision:
    """The planner's answer: a plan, or the reason there is none.

    Attributes:
        plan: The plan, or `None`.
        skip_reason: Why there is no plan.
        tokens_before: Estimated tokens of the next request as it stands.
        detail: One line: the plan's reason or what the skip measured.
        oversized_tail_ids: As `CompactionPlan.oversized_tail_ids`; without a plan, set when
            the request is over budget and only the newest exchange could be cut down.
    """

    plan: CompactionPlan | None
    skip_reason: SkipReason | None
    tokens_before: int
    detail: str
    oversized_tail_ids: tuple[str, ...] = ()


class _Skip(Exception):
    """A planning step found nothing worth compacting."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class _Call:
    """One planner call's inputs and the request measured once, shared by every step."""

    messages: Sequence[BaseMessage]
    policy: CompactionPolicy
    counter: TokenCounter
    static_tokens: int
    total: int
    message_tokens: int
    message_count: int
    prefer_cut: int | None = None

    @property
    def over_budget(self) -> bool:
        """Whether the request as it stands exceeds the budget."""
        budget = self.policy.budget_limit
        return budget is not None and self.total > budget


@dataclass(frozen=True)
class _Trigger:
    """Why a plan is being built: the clause, its measured metric and the reason line."""

    kind: str
    metric: int
    threshold: int | None
    reason: str


def _measure(
    messages: Sequence[BaseMessage],
    policy: CompactionPolicy,
    counter: TokenCounter,
    summary_text: str | None,
    static_tokens: int,
    prefer_cut: int | None = None,
) -> _Call:
    """Count the whole request with the (incremental) counter: the only per-call O(new) step."""
    # What is rendered is what is counted (an over-long legacy summary is capped the same way).
    summary_tokens = counter.count_text(summary_for_context(summary_text)) if summary_text else 0
    try:
        request = counter.count_request(messages, static_tokens=static_tokens + summary_tokens)
    except Exception:
        validate_messages(messages)  # names the malformed message, if that is the cause
        raise
    count = len(messages) + (1 if summary_text else 0)
    return _Call(
        messages,
        policy,
        counter,
        static_tokens,
        request.total,
        request.messages,
        count,
        prefer_cut,
    )


def _fired_trigger(call: _Call, *, force: bool) -> _Trigger | None:
    """The reason to compact: manual, a configured clause, or the budget invariant."""
    total, policy = call.total, call.policy
    if force:
        return _Trigger("manual", total, None, f"manual compaction (request at {total:,} tokens)")
    for clause in policy.triggers:
        metric = call.message_count if clause.kind == "messages" else total
        if metric >= clause.limit:
            unit = "messages" if clause.kind == "messages" else "tokens"
            reason = f"{clause.describe()}: measured {metric:,} {unit}"
            return _Trigger(clause.kind, metric, clause.limit, reason)
    budget = policy.budget_limit
    if budget is None or total <= budget:
        return None
    reason = (
        f"budget invariant: request {total:,} tokens > {budget:,} "
        f"(window {policy.context_window:,} minus {policy.reserved_output_tokens:,} reserved)"
    )
    return _Trigger("budget", total, budget, reason)


def _below_threshold(call: _Call) -> CompactionDecision:
    """The decision when nothing fired: O(1), no message is looked at."""
    limits = ", ".join(t.describe() for t in call.policy.triggers) or "no trigger configured"
    detail = f"request at {call.total:,} tokens / {call.message_count} messages; {limits}"
    return CompactionDecision(None, SkipReason.BELOW_THRESHOLD, call.total, detail)


def _tail_start(call: _Call, counts: Counts, limit: int) -> int:
    """First index of the longest tail within `limit` tokens; O(1) when everything fits."""
    if call.message_tokens <= limit:
        return 0
    return tail_start_for_tokens(counts, limit)


def _keep_cut(call: _Call, counts: Counts) -> int:
    """First index of the tail that `keep` asks for."""
    keep_tokens = call.policy.keep_tokens()
    if keep_tokens is None:
        return len(counts) - int(call.policy.keep.value)
    return _tail_start(call, counts, keep_tokens)


def _budget_cut(call: _Call, trigger: _Trigger, counts: Counts) -> int:
    """First index of the longest tail that fits the budget beside the summary (0: any)."""
    budget = call.policy.budget_limit
    if budget is None or (trigger.kind == "manual" and not call.over_budget):
        return 0
    room = budget - call.static_tokens - call.policy.summary_max_tokens
    return _tail_start(call, counts, max(1, room))


def _choose_cut(
    call: _Call,
    trigger: _Trigger,
    counts: Counts,
    pairing: ToolPairing,
    exchange: NewestExchange | None,
) -> int:
    """The cut: keep and budget targets, moved so no pair is split and the end stays whole."""
    keep_cut = _keep_cut(call, counts)
    budget_cut = _budget_cut(call, trigger, counts)
    desired = max(keep_cut, budget_cut)
    n = len(counts)
    if desired <= 0:
        detail = f"keep {call.policy.keep.describe()} already covers all {n} messages"
        raise _Skip(SkipReason.NOT_ENOUGH_MESSAGES, detail)
    upper = cut_upper_bound(call.messages, pairing, exchange)
    if upper < 1:
        raise _Skip(SkipReason.NOT_ENOUGH_MESSAGES, "only the newest tool call to keep")
    forbidden = pairing.forbidden_cuts(n)
    prefer = call.prefer_cut
    # A cut chosen earlier (a background summary's span) that keeps at least what `keep` asks,
    # fits the budget and splits no tool pair is taken as it is.
    if prefer and max(1, budget_cut) <= prefer <= min(desired, upper) and not forbidden[prefer]:
        return prefer
    cut = safe_cut(forbidden, desired, upper=upper, prefer_forward=budget_cut > keep_cut)
    if cut <= 0:
        detail = "no cut point keeps every tool call with its result"
        raise _Skip(SkipReason.NOT_ENOUGH_MESSAGES, detail)
    return cut


def _budget_excess(call: _Call, split: Split, counts: Counts) -> int:
    """How far the kept part plus the summary allowance would exceed the budget (or 0)."""
    budget = call.policy.budget_limit
    if budget is None:
        return 0
    kept = sum(counts[i] for i in split.kept)
    return max(0, kept + call.static_tokens + call.policy.summary_max_tokens - budget)


def _rescue(
    call: _Call, cut: int, pairing: ToolPairing, latest_user: int | None, counts: Counts
) -> Split:
    """Split at `cut`, rescuing reminders and user messages; skip if nothing is summarized.

    Over budget, the oldest user messages too small to store behind a preview are summarized
    (the archive keeps them verbatim) rather than kept in a request that cannot fit.
    """
    split = split_at(call.messages, cut, pairing, call.policy, latest_user)
    if call.policy.preserve_human == "all":
        excess = _budget_excess(call, split, counts)
        split = demote_for_budget(call.messages, split, counts, latest_user, excess=excess)
    if not split.kept:
        raise _Skip(SkipReason.NOT_ENOUGH_MESSAGES, "the cut would keep no message at all")
    if not split.summarized:
        detail = f"all {cut} messages before the cut are kept verbatim"
        raise _Skip(SkipReason.EVERYTHING_RESCUED, detail)
    return split


def _tokens_after(call: _Call, split: Split, counts: Counts) -> tuple[int, int]:
    """Estimated tokens of the next request after compaction, and of its kept messages."""
    kept = sum(counts[i] for i in split.kept)
    removed = call.message_tokens - kept  # summarized and kept partition the messages
    summary_estimate = min(call.policy.summary_max_tokens, max(1, removed // 4))
    # Estimated afresh: an anchor on provider usage does not survive the removal.
    return call.static_tokens + summary_estimate + kept, kept


def _gain_check(call: _Call, trigger: _Trigger, after: int) -> None:
    """Anti-thrash: skip a triggered compaction that frees less than `min_gain_tokens`."""
    minimum = call.policy.min_gain_tokens
    if trigger.kind in ("manual", "budget") or call.over_budget or minimum <= 0:
        return
    gain = call.total - after
    if gain < minimum:
        detail = f"would free about {gain:,} tokens, below min_gain_tokens {minimum:,}"
        raise _Skip(SkipReason.GAIN_TOO_SMALL, detail)


def _plan(call: _Call, trigger: _Trigger) -> CompactionDecision:
    """Build the plan once a trigger fired (O(n)); a step with nothing to do raises `_Skip`."""
    messages, policy = call.messages, call.policy
    validate_messages(messages)
    counts = LazyCounts(messages, call.counter)
    exchange = newest_exchange(messages)
    try:
        pairing = analyze_tool_pairing(messages)
        cut = _choose_cut(call, trigger, counts, pairing, exchange)
        latest_user = latest_user_index(messages)
        split = _rescue(call, cut, pairing, latest_user, counts)
        after, kept_tokens = _tokens_after(call, split, counts)
        _gain_check(call, trigger, after)
    except _Skip as skip:
        oversized = oversized_results(messages, exchange, counts, fits=not call.over_budget)
        return CompactionDecision(None, skip.reason, call.total, skip.detail, oversized)
    budget = policy.budget_limit
    tail_over = budget is not None and (
        kept_tokens + call.static_tokens + policy.summary_max_tokens > budget
    )
    plan = CompactionPlan(
        to_summarize=tuple(messages[i] for i in split.summarized),
        preserved=tuple(messages[i] for i in split.kept),
        summary_input=tuple(messages[:cut]),
        rescued_ids=tuple(str(messages[i].id) for i in split.rescued),
        human_overflow_ids=human_overflow(
            messages,
            split,
            counts,
            policy,
            latest_user,
            excess=kept_tokens + call.static_tokens + policy.summary_max_tokens - budget
            if budget is not None
            else 0,
        ),
        trigger=trigger.kind,
        reason=trigger.reason,
        metric=trigger.metric,
        threshold=trigger.threshold,
        tokens_before=call.total,
        estimated_tokens_after=after,
        cutoff=cut,
        tail_over_budget=tail_over,
        oversized_tail_ids=oversized_results(messages, exchange, counts, fits=not tail_over),
    )
    return CompactionDecision(plan, None, call.total, trigger.reason, plan.oversized_tail_ids)


def decide_compaction(
    messages: Sequence[BaseMessage],
    *,
    policy: CompactionPolicy,
    summary_text: str | None = None,
    counter: TokenCounter | None = None,
    force: bool = False,
    static_tokens: int = 0,
    prefer_cut: int | None = None,
) -> CompactionDecision:
    """Decide whether and how to compact `messages`; pure, never mutates its inputs.

    It runs before every model call: when nothing fires it returns right after counting, so
    its cost grows with what is new since the last call (the counter is incremental); the
    O(n) analysis (pairing, rescue, cuts) runs only when a plan is being built.

    The newest tool exchange at the end (the last AIMessage with tool calls and its results)
    and the current request (the latest real user message) are never summarized; when they
    alone do not fit, `oversized_tail_ids` names the results to clip or offload.

    Args:
        messages: The agent's current messages (state, not the rendered request).
        policy: Resolved thresholds (`CompactionPolicy.from_config`).
        summary_text: The existing summary; it counts toward the trigger.
        counter: Token counter of the run model (default: the script-aware estimate).
        force: Compact even when no trigger fired (manual compaction).
        static_tokens: Tokens of the rest of the request: system prompt, tool schemas and the
            rendered durable context without the summary.
        prefer_cut: Cut here instead when that keeps at least what `keep` asks, fits the
            budget and splits no tool pair (the span a background summary was made of).

    Raises:
        MessageFormatError: A message is malformed; names its index.
    """
    if counter is None:
        from foldwise.tokens import get_counter

        counter = get_counter()
    call = _measure(messages, policy, counter, summary_text, static_tokens, prefer_cut)
    if not messages:
        return CompactionDecision(None, SkipReason.NOT_ENOUGH_MESSAGES, call.total, "no messages")
    trigger = _fired_trigger(call, force=force)
    if trigger is None:
        return _below_threshold(call)
    return _plan(call, trigger)


def _plan_only(
    decide: Callable[P, CompactionDecision],
) -> Callable[P, CompactionPlan | None]:
    """`decide` returning only the decision's plan (same signature, for mypy and `inspect`)."""

    @functools.wraps(decide)
    def plan(*args: P.args, **kwargs: P.kwargs) -> CompactionPlan | None:
        return decide(*args, **kwargs).plan

    plan.__name__ = plan.__qualname__ = "plan_compaction"
    plan.__signature__ = inspect.signature(decide).replace(  # type: ignore[attr-defined]
        return_annotation="CompactionPlan | None"
    )
    plan.__doc__ = """Plan a compaction of `messages`, or return `None` when there is nothing to do.

    It takes the arguments of `decide_compaction`, which also says why it returns `None`.
    """
    return plan


plan_compaction = _plan_only(decide_compaction)
