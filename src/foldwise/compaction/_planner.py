"""The pure compaction planner: when to compact, where to cut, what to keep verbatim."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage

from foldwise.compaction._policy import CompactionPolicy, Threshold
from foldwise.messages import (
    analyze_tool_pairing,
    is_dynamic_reminder,
    is_real_user_message,
    validate_messages,
)

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = [
    "SUMMARY_ALLOWANCE_TOKENS",
    "CompactionDecision",
    "CompactionPlan",
    "SkipReason",
    "decide_compaction",
    "plan_compaction",
]

SUMMARY_ALLOWANCE_TOKENS = 2000
"""Room the budget invariant leaves for the summary that replaces the removed span."""


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
        tail_over_budget: The kept tail alone does not fit the budget (offload is needed).
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


@dataclass(frozen=True)
class CompactionDecision:
    """The planner's answer: a plan, or the reason there is none."""

    plan: CompactionPlan | None
    skip_reason: SkipReason | None
    tokens_before: int
    detail: str


def _fired(
    policy: CompactionPolicy, total: int, message_count: int
) -> tuple[Threshold, int] | None:
    for clause in policy.triggers:
        metric = message_count if clause.kind == "messages" else total
        if metric >= clause.limit:
            return clause, metric
    return None


def _tail_start_for_tokens(counts: Sequence[int], budget: int) -> int:
    """Smallest index whose suffix fits in `budget` tokens (len when nothing fits)."""
    running = 0
    for index in range(len(counts) - 1, -1, -1):
        running += counts[index]
        if running > budget:
            return index + 1
    return 0


def _safe_cut(forbidden: Sequence[bool], desired: int, *, upper: int, prefer_forward: bool) -> int:
    """Nearest cut to `desired` in `1..upper` that splits no call/result pair (0 if none)."""
    desired = max(1, min(desired, upper))
    backward = next((c for c in range(desired, 0, -1) if not forbidden[c]), 0)
    forward = next((c for c in range(desired, upper + 1) if not forbidden[c]), 0)
    if prefer_forward:
        return forward or backward
    return backward or forward


def decide_compaction(
    messages: Sequence[BaseMessage],
    *,
    policy: CompactionPolicy,
    summary_text: str | None = None,
    counter: TokenCounter | None = None,
    force: bool = False,
    static_tokens: int = 0,
) -> CompactionDecision:
    """Decide whether and how to compact `messages`; pure, never mutates its inputs.

    Args:
        messages: The agent's current messages (state, not the rendered request).
        policy: Resolved thresholds (`CompactionPolicy.from_config`).
        summary_text: The existing summary; it counts toward the trigger.
        counter: Token counter of the run model (default: the script-aware estimate).
        force: Compact even when no trigger fired (manual compaction).
        static_tokens: Tokens of the rest of the request: system prompt, tool schemas and the
            rendered durable context without the summary.

    Raises:
        MessageFormatError: A message is malformed; names its index.
    """
    if counter is None:
        from foldwise.tokens import get_counter

        counter = get_counter()
    summary_tokens = counter.count_text(summary_text) if summary_text else 0
    try:
        request = counter.count_request(messages, static_tokens=static_tokens + summary_tokens)
    except Exception:
        validate_messages(messages)  # names the malformed message, if that is the cause
        raise
    total = request.total
    if not messages:
        return CompactionDecision(None, SkipReason.NOT_ENOUGH_MESSAGES, total, "no messages")

    message_count = len(messages) + (1 if summary_text else 0)
    budget = policy.budget_limit
    over_budget = budget is not None and total > budget
    fired = _fired(policy, total, message_count)
    if force:
        trigger, metric, threshold = "manual", total, None
        reason = f"manual compaction (request at {total:,} tokens)"
    elif fired is not None:
        clause, metric = fired
        trigger, threshold = clause.kind, clause.limit
        unit = "messages" if clause.kind == "messages" else "tokens"
        reason = f"{clause.describe()}: measured {metric:,} {unit}"
    elif over_budget:
        assert budget is not None
        trigger, metric, threshold = "budget", total, budget
        reason = (
            f"budget invariant: request {total:,} tokens > {budget:,} "
            f"(window {policy.context_window:,} minus {policy.reserved_output_tokens:,} reserved)"
        )
    else:
        limits = ", ".join(t.describe() for t in policy.triggers) or "no trigger configured"
        return CompactionDecision(
            None,
            SkipReason.BELOW_THRESHOLD,
            total,
            f"request at {total:,} tokens / {message_count} messages; {limits}",
        )

    # Full validation only when we are about to cut: the per-call fast path stays O(new).
    validate_messages(messages)
    counts = [counter.count_message(m) for m in messages]
    n = len(messages)
    keep_tokens = policy.keep_tokens()
    if keep_tokens is None:
        desired = n - int(policy.keep.value)
    else:
        desired = _tail_start_for_tokens(counts, keep_tokens)
    budget_cut = 0
    if budget is not None and (over_budget or trigger != "manual"):
        room = budget - static_tokens - SUMMARY_ALLOWANCE_TOKENS
        budget_cut = _tail_start_for_tokens(counts, max(1, room))
    prefer_forward = budget_cut > desired
    desired = max(desired, budget_cut)
    if desired <= 0:
        return CompactionDecision(
            None,
            SkipReason.NOT_ENOUGH_MESSAGES,
            total,
            f"keep {policy.keep.describe()} already covers all {n} messages",
        )

    pairing = analyze_tool_pairing(messages)
    upper = n
    last_ai = next((i for i in range(n - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if last_ai is not None and any(ai == last_ai for ai, _ in pairing.pending_calls):
        upper = last_ai  # calls still pending at the end stay with their AIMessage
    if upper < 1:
        return CompactionDecision(
            None, SkipReason.NOT_ENOUGH_MESSAGES, total, "only a pending tool call to keep"
        )
    cut = _safe_cut(pairing.forbidden_cuts(n), desired, upper=upper, prefer_forward=prefer_forward)
    if cut <= 0:
        return CompactionDecision(
            None,
            SkipReason.NOT_ENOUGH_MESSAGES,
            total,
            "no cut point keeps every tool call with its result",
        )

    orphans = set(pairing.orphan_results)
    latest_user = next((i for i in range(n - 1, -1, -1) if is_real_user_message(messages[i])), None)
    rescued: list[int] = []
    summarized: list[int] = []
    for index in range(cut):
        message = messages[index]
        keep_verbatim = is_dynamic_reminder(message) or (
            is_real_user_message(message)
            and (index == latest_user or policy.preserve_human == "all")
            and policy.preserve_human != "none"
        )
        (rescued if keep_verbatim and index not in orphans else summarized).append(index)
    tail = [i for i in range(cut, n) if i not in orphans]
    summarized.extend(i for i in range(cut, n) if i in orphans)
    if not rescued and not tail:
        return CompactionDecision(
            None, SkipReason.NOT_ENOUGH_MESSAGES, total, "the cut would keep no message at all"
        )
    if not summarized:
        return CompactionDecision(
            None,
            SkipReason.EVERYTHING_RESCUED,
            total,
            f"all {cut} messages before the cut are kept verbatim",
        )

    overflow: list[str] = []
    if policy.preserve_human == "all":
        human = [i for i in rescued if is_real_user_message(messages[i]) and i != latest_user]
        human_tokens = sum(counts[i] for i in human)
        for i in human:
            if human_tokens <= policy.preserve_human_max_tokens:
                break
            overflow.append(str(messages[i].id))
            human_tokens -= counts[i]

    removed_tokens = sum(counts[i] for i in summarized)
    summary_estimate = min(SUMMARY_ALLOWANCE_TOKENS, max(1, removed_tokens // 4))
    kept_tokens = sum(counts[i] for i in rescued) + sum(counts[i] for i in tail)
    # The next request is estimated afresh (an anchor on usage does not survive the removal).
    after = static_tokens + summary_estimate + kept_tokens
    gain = total - after
    if (
        trigger not in ("manual", "budget")
        and not over_budget
        and policy.min_gain_tokens > 0
        and gain < policy.min_gain_tokens
    ):
        return CompactionDecision(
            None,
            SkipReason.GAIN_TOO_SMALL,
            total,
            f"would free about {gain:,} tokens, below min_gain_tokens {policy.min_gain_tokens:,}",
        )
    tail_over = budget is not None and (
        kept_tokens + static_tokens + SUMMARY_ALLOWANCE_TOKENS > budget
    )
    plan = CompactionPlan(
        to_summarize=tuple(messages[i] for i in sorted(summarized)),
        preserved=tuple(messages[i] for i in [*rescued, *tail]),
        summary_input=tuple(messages[:cut]),
        rescued_ids=tuple(str(messages[i].id) for i in rescued),
        human_overflow_ids=tuple(overflow),
        trigger=trigger,
        reason=reason,
        metric=metric,
        threshold=threshold,
        tokens_before=total,
        estimated_tokens_after=after,
        cutoff=cut,
        tail_over_budget=tail_over,
    )
    return CompactionDecision(plan, None, total, reason)


def plan_compaction(
    messages: Sequence[BaseMessage],
    *,
    policy: CompactionPolicy,
    summary_text: str | None = None,
    counter: TokenCounter | None = None,
    force: bool = False,
    static_tokens: int = 0,
) -> CompactionPlan | None:
    """Plan a compaction of `messages`, or return `None` when there is nothing to do.

    See `decide_compaction` for the arguments and for the reason when it returns `None`.
    """
    return decide_compaction(
        messages,
        policy=policy,
        summary_text=summary_text,
        counter=counter,
        force=force,
        static_tokens=static_tokens,
    ).plan
