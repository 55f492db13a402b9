"""The engine's data and its pure helpers: call options, outcomes, events, jobs, receipts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from foldwise.compaction._planner import CompactionDecision, CompactionPlan, SkipReason
from foldwise.compaction._policy import CompactionPolicy
from foldwise.compaction._prompt import build_summary_prompt
from foldwise.compaction._receipt import CompactionReceipt
from foldwise.compaction._summarize import PromptFor, SummaryResult
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.errors import SummaryGenerationError

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = [
    "CompactOptions",
    "CompactionJob",
    "CompactionOutcome",
    "SummarizationEvent",
    "build_receipt",
    "job_prompt",
]


class CompactOptions(TypedDict, total=False):
    """Keyword options of `Compactor.compact` / `acompact` / `compact_steps`."""

    force: bool
    """Compact even when no trigger fires."""
    static_tokens: int
    """Tokens of the request outside `messages` (system prompt, tools, durable block)."""
    policy: CompactionPolicy | None
    """Thresholds for this call (a manual `keep`, a provider-calibrated budget)."""
    thread_id: str | None
    run_id: str | None
    model_name: str | None
    """The run model to summarize with, when it differs from the default."""
    manual: bool
    raise_on_failure: bool
    """Raise `SummaryGenerationError` instead of returning a failed outcome."""
    trigger: str | None
    """Overrides the plan's trigger in the receipt (e.g. `overflow`)."""
    decision: CompactionDecision | None
    """A decision already computed by `decide` with the same inputs (skips re-planning)."""
    publish: bool
    """Notify observers before returning (False: the caller calls `publish` after its write)."""


@dataclass(frozen=True)
class SummarizationEvent:
    """What `before_summarization` hooks receive: fired only after a valid summary exists."""

    messages_to_summarize: tuple[BaseMessage, ...]
    preserved_messages: tuple[BaseMessage, ...]
    thread_id: str | None
    summary_text: str


@dataclass(frozen=True)
class CompactionOutcome:
    """The result of one compaction attempt: committed, skipped, or failed."""

    decision: CompactionDecision
    plan: CompactionPlan | None = None
    summary_text: str | None = None
    receipt: CompactionReceipt | None = None
    preserved: tuple[BaseMessage, ...] = ()
    error: SummaryGenerationError | None = None
    offload_refs: tuple[dict[str, Any], ...] = ()

    @property
    def compacted(self) -> bool:
        """Whether a new summary was produced and the update should be committed."""
        return self.receipt is not None

    @property
    def skip_reason(self) -> SkipReason | None:
        """Why nothing was planned, if nothing was."""
        return self.decision.skip_reason

    def state_update(self) -> dict[str, Any] | None:
        """The single state write: remove all, re-add the preserved, new summary, receipt."""
        if self.receipt is None or self.summary_text is None:
            return None
        update: dict[str, Any] = {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.preserved],
            "summary_text": self.summary_text,
            "compactions": [self.receipt.to_dict()],
        }
        if self.offload_refs:
            update["offloads"] = list(self.offload_refs)
        return update


@dataclass(frozen=True)
class CompactionJob:
    """A planned compaction waiting for its summary (internal to the engine)."""

    decision: CompactionDecision
    plan: CompactionPlan
    prompt: PromptFor
    replaced: int
    started: float
    names: list[str]
    static_tokens: int


def job_prompt(
    plan: CompactionPlan,
    summary_text: str | None,
    policy: CompactionPolicy,
    counter: TokenCounter,
    *,
    counts_overflow: bool,
) -> tuple[PromptFor, int]:
    """The prompt for each candidate and the tokens the summary replaces (its upper bound).

    Args:
        plan: The compaction's plan.
        summary_text: The prior summary.
        policy: Prompt template, trimming and size target.
        counter: The run model's counter.
        counts_overflow: Preserved user input beyond the budget is stored verbatim by this
            compaction, so it counts as freed too.
    """

    def build(trim: int | None) -> str:
        prompt = build_summary_prompt(
            plan.summary_input,
            summary_text,
            trim_tokens=trim,
            counter=counter,
            template=policy.summary_prompt,
            target_tokens=policy.summary_max_tokens,
        )
        return prompt or ""

    built: dict[int | None, str] = {}  # by trim; built on first use (a hit never needs one)

    def prompt_for(name: str) -> str:
        # The offline summarizer has no input window: it reads the whole span, so a fact
        # never falls out of the summary just because the model-sized input was trimmed.
        trim = policy.trim_tokens_to_summarize if name != BUILTIN_EXTRACTIVE else None
        if trim not in built:
            built[trim] = build(trim)
        return built[trim]

    replaced = sum(counter.count_message(m) for m in plan.to_summarize)
    if summary_text:
        replaced += counter.count_text(summary_text)
    if counts_overflow and plan.human_overflow_ids:
        # The compaction also frees the user input it stores verbatim: a summary of a small
        # span is still worth it when it goes with that.
        overflow = set(plan.human_overflow_ids)
        replaced += sum(counter.count_message(m) for m in plan.preserved if str(m.id) in overflow)
    return prompt_for, replaced


def build_receipt(
    job: CompactionJob,
    result: SummaryResult,
    preserved: Sequence[BaseMessage],
    refs: Sequence[dict[str, Any]],
    archive: dict[str, Any] | None,
    options: CompactOptions,
    counter: TokenCounter,
) -> CompactionReceipt:
    """The receipt of a committed compaction (its id and `precomputed` are set by the caller)."""
    plan = job.plan
    # Estimated afresh: the usage anchor behind tokens_before does not survive the removal.
    after = (
        job.static_tokens
        + counter.count_text(result.text)
        + counter.count_messages(preserved, anchor=False)
    )
    return CompactionReceipt(
        thread_id=options.get("thread_id"),
        run_id=options.get("run_id"),
        manual=options.get("manual", False),
        trigger=options.get("trigger") or plan.trigger,
        reason=plan.reason,
        metric=plan.metric,
        threshold=plan.threshold,
        tokens_before=plan.tokens_before,
        tokens_after=max(0, after),
        messages_removed=len(plan.to_summarize),
        messages_preserved=len(preserved),
        messages_rescued=len(plan.rescued_ids),
        summary_chars=len(result.text),
        model_used=result.model_name,
        attempts=list(result.attempts),
        duration_ms=(time.perf_counter() - job.started) * 1000,
        offloaded_ids=[str(ref.get("artifact_id")) for ref in refs],
        archive_id=str(archive["artifact_id"]) if archive else None,
    )
