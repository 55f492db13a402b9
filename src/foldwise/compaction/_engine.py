"""`Compactor`: plan, summarize, validate and build one state update, for every entry point."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from foldwise._lru import LRUDict
from foldwise._steps import Io, Steps, run_async, run_sync
from foldwise._telemetry import record_compaction
from foldwise.compaction._planner import (
    CompactionDecision,
    CompactionPlan,
    SkipReason,
    decide_compaction,
)
from foldwise.compaction._policy import CompactionPolicy
from foldwise.compaction._prompt import build_summary_prompt
from foldwise.compaction._receipt import CompactionReceipt
from foldwise.compaction._summarize import (
    ModelResolver,
    PromptFor,
    SummaryResult,
    candidate_names,
    summary_steps,
)
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.errors import SummaryGenerationError

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = ["CompactOptions", "CompactionOutcome", "Compactor", "SummarizationEvent"]

logger = logging.getLogger(__name__)

Archiver = Callable[[Sequence[BaseMessage], "str | None"], "Steps[dict[str, Any] | None]"]
"""Steps that store the messages a compaction removes verbatim; return the artifact reference."""

Offloader = Callable[
    [BaseMessage, "str | None"], "Steps[tuple[BaseMessage, dict[str, Any]] | None]"
]
"""Steps that store a message verbatim; return its preview replacement (same id) and the ref."""


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
class _Job:
    """A planned compaction waiting for its summary."""

    decision: CompactionDecision
    plan: CompactionPlan
    prompt: PromptFor
    replaced: int
    started: float
    names: list[str]
    static_tokens: int


@dataclass
class Compactor:
    """Runs the compaction pipeline with one configuration.

    Attributes:
        policy: Default thresholds (a call may pass another, e.g. a manual `keep`).
        resolve: Returns the chat model for a candidate name (raises when it cannot).
        summary_model: Configured `summarization.model_name` (tried first).
        run_model: The run's own model name (tried second).
        fallback: Last-resort summarizer name (`extractive` by default).
        counter: The run model's token counter.
        timeout_seconds: Timeout of one summarizer call.
        fallback_after_failures: After this many consecutive failures on a thread, go straight
            to the fallback.
        hooks: `before_summarization` callbacks; errors are logged, never fatal.
        flushes: Called with the span and the receipt id a compaction will commit under; each
            returns an `Io` the compaction performs before it is committed (long-term memory
            enqueues the span there). A failing flush fails the compaction: nothing changes.
        observers: Called with each committed receipt.
        offloader: Stores over-budget preserved user messages verbatim (optional).
        archiver: Stores the removed span verbatim so details the summary drops stay
            searchable (optional).
    """

    policy: CompactionPolicy
    resolve: ModelResolver
    counter: TokenCounter
    summary_model: str | None = None
    run_model: str | None = None
    fallback: str | None = "extractive"
    timeout_seconds: float = 120.0
    fallback_after_failures: int = 2
    hooks: Sequence[Callable[[SummarizationEvent], None]] = ()
    flushes: Sequence[Callable[[SummarizationEvent, str], Io[Any]]] = ()
    observers: Sequence[Callable[[CompactionReceipt], None]] = ()
    offloader: Offloader | None = None
    archiver: Archiver | None = None
    _failures: LRUDict[str, int] = field(default_factory=LRUDict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def decide(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        *,
        force: bool = False,
        static_tokens: int = 0,
        policy: CompactionPolicy | None = None,
    ) -> CompactionDecision:
        """Run only the planner."""
        return decide_compaction(
            messages,
            policy=policy or self.policy,
            summary_text=summary_text,
            counter=self.counter,
            force=force,
            static_tokens=static_tokens,
        )

    def _names(self, thread_id: str | None, model_name: str | None) -> list[str]:
        with self._lock:
            failures = self._failures.get(thread_id or "", 0)
        return candidate_names(
            configured=self.summary_model,
            run_model=model_name or self.run_model,
            fallback=self.fallback,
            skip_to_fallback=failures >= self.fallback_after_failures,
        )

    def _prompt(
        self, plan: CompactionPlan, summary_text: str | None, policy: CompactionPolicy
    ) -> tuple[PromptFor, int]:
        def build(trim: int | None) -> str:
            prompt = build_summary_prompt(
                plan.summary_input,
                summary_text,
                trim_tokens=trim,
                counter=self.counter,
                template=policy.summary_prompt,
                target_tokens=policy.summary_max_tokens,
            )
            return prompt or ""

        trimmed = build(policy.trim_tokens_to_summarize)
        untrimmed: list[str] = []

        def prompt_for(name: str) -> str:
            # The offline summarizer has no input window: it reads the whole span, so a fact
            # never falls out of the summary just because the model-sized input was trimmed.
            if name != BUILTIN_EXTRACTIVE or policy.trim_tokens_to_summarize is None:
                return trimmed
            if not untrimmed:
                untrimmed.append(build(None))
            return untrimmed[0]

        replaced = sum(self.counter.count_message(m) for m in plan.to_summarize)
        if summary_text:
            replaced += self.counter.count_text(summary_text)
        if self.offloader is not None and plan.human_overflow_ids:
            # The compaction also frees the user input it stores verbatim: a summary of a small
            # span is still worth it when it goes with that.
            overflow = set(plan.human_overflow_ids)
            replaced += sum(
                self.counter.count_message(m) for m in plan.preserved if str(m.id) in overflow
            )
        return prompt_for, replaced

    def _record(self, thread_id: str | None, ok: bool) -> None:
        with self._lock:
            key = thread_id or ""
            self._failures[key] = 0 if ok else self._failures.get(key, 0) + 1

    def _receipt(
        self,
        job: _Job,
        result: SummaryResult,
        preserved: Sequence[BaseMessage],
        refs: Sequence[dict[str, Any]],
        archive: dict[str, Any] | None,
        options: CompactOptions,
    ) -> CompactionReceipt:
        plan = job.plan
        # Estimated afresh: the usage anchor behind tokens_before does not survive the removal.
        after = (
            job.static_tokens
            + self.counter.count_text(result.text)
            + self.counter.count_messages(preserved, anchor=False)
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

    def _run_hooks(self, job: _Job, result: SummaryResult, thread_id: str | None) -> None:
        plan = job.plan
        event = SummarizationEvent(plan.to_summarize, plan.preserved, thread_id, result.text)
        for hook in self.hooks:
            try:
                hook(event)
            except Exception:
                logger.exception(
                    "before_summarization hook %s failed (thread %s)",
                    getattr(hook, "__name__", hook),
                    thread_id,
                )

    def publish(self, outcome: CompactionOutcome) -> None:
        """Log the committed receipt and notify the observers (errors are logged)."""
        receipt = outcome.receipt
        if receipt is None:
            return
        logger.info("%s", receipt.log_line())
        record_compaction(receipt)
        for observer in self.observers:
            try:
                observer(receipt)
            except Exception:
                logger.exception("compaction observer failed (thread %s)", receipt.thread_id)

    def _finish_steps(
        self, job: _Job, result: SummaryResult, options: CompactOptions
    ) -> Steps[CompactionOutcome]:
        thread_id = options.get("thread_id")
        self._record(thread_id, ok=True)
        self._run_hooks(job, result, thread_id)
        receipt_id = f"cmp_{uuid.uuid4().hex[:16]}"
        try:
            yield from self._flush_steps(job, result, thread_id, receipt_id)
        except Exception as exc:
            err = SummaryGenerationError(f"the compaction's memory flush failed: {exc}")
            if options.get("raise_on_failure", False):
                raise err from exc
            logger.error("compaction skipped (thread %s): %s", thread_id, err)
            return CompactionOutcome(job.decision, job.plan, error=err)
        preserved, refs = yield from self._offload_overflow_steps(job.plan, thread_id)
        archive = yield from self._archive_steps(job.plan, thread_id)
        receipt = self._receipt(job, result, preserved, refs, archive, options)
        receipt = receipt.model_copy(update={"id": receipt_id})
        if archive is not None:
            refs.append(archive)
        outcome = CompactionOutcome(
            job.decision, job.plan, result.text, receipt, tuple(preserved), offload_refs=tuple(refs)
        )
        if options.get("publish", True):
            self.publish(outcome)
        return outcome

    def _flush_steps(
        self, job: _Job, result: SummaryResult, thread_id: str | None, receipt_id: str
    ) -> Steps[None]:
        if not self.flushes:
            return
        plan = job.plan
        event = SummarizationEvent(plan.to_summarize, plan.preserved, thread_id, result.text)
        for flush in self.flushes:
            yield flush(event, receipt_id)

    def _archive_steps(
        self, plan: CompactionPlan, thread_id: str | None
    ) -> Steps[dict[str, Any] | None]:
        if self.archiver is None:
            return None
        try:
            return (yield from self.archiver(plan.to_summarize, thread_id))
        except Exception:
            logger.exception("archiving compacted messages failed (thread %s)", thread_id)
            return None

    def _offload_overflow_steps(
        self, plan: CompactionPlan, thread_id: str | None
    ) -> Steps[tuple[list[BaseMessage], list[dict[str, Any]]]]:
        preserved = list(plan.preserved)
        if not plan.human_overflow_ids or self.offloader is None:
            return preserved, []
        overflow = set(plan.human_overflow_ids)
        refs: list[dict[str, Any]] = []
        for index, message in enumerate(preserved):
            if str(message.id) not in overflow:
                continue
            try:
                stored = yield from self.offloader(message, thread_id)
            except Exception:
                logger.exception(
                    "offloading user message %s failed (thread %s)", message.id, thread_id
                )
                continue
            if stored is None:
                continue
            replacement, ref = stored
            if self.counter.count_message(replacement) >= self.counter.count_message(message):
                continue  # its preview would not be smaller: keep it whole (the copy is inert)
            preserved[index] = replacement
            refs.append(ref)
        return preserved, refs

    def _begin(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        options: CompactOptions,
    ) -> _Job | CompactionOutcome:
        """Plan and build the prompt; an outcome when there is nothing to summarize."""
        started = time.perf_counter()
        policy = options.get("policy") or self.policy
        static_tokens = options.get("static_tokens", 0)
        decision = options.get("decision")
        if decision is None:
            decision = self.decide(
                messages,
                summary_text,
                force=options.get("force", False),
                static_tokens=static_tokens,
                policy=policy,
            )
        if decision.plan is None:
            return CompactionOutcome(decision)
        prompt, replaced = self._prompt(decision.plan, summary_text, policy)
        names = self._names(options.get("thread_id"), options.get("model_name"))
        return _Job(decision, decision.plan, prompt, replaced, started, names, static_tokens)

    def compact_steps(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        **options: Unpack[CompactOptions],
    ) -> Steps[CompactionOutcome]:
        """The compaction pipeline as steps: plan, summarize, store, build the update.

        Never mutates state itself; `CompactionOutcome.state_update` is the one write.
        """
        job = self._begin(messages, summary_text, options)
        if isinstance(job, CompactionOutcome):
            return job
        thread_id = options.get("thread_id")
        policy = options.get("policy") or self.policy
        try:
            result = yield from summary_steps(
                job.prompt,
                job.names,
                self.resolve,
                input_tokens=job.replaced,
                count=self.counter.count_text,
                timeout=self.timeout_seconds,
                target_tokens=policy.summary_max_tokens,
            )
        except SummaryGenerationError as err:
            self._record(thread_id, ok=False)
            if options.get("raise_on_failure", False):
                raise
            logger.error(
                "compaction skipped this turn, every summarizer failed (thread %s): %s",
                thread_id,
                err,
            )
            return CompactionOutcome(job.decision, job.plan, error=err)
        return (yield from self._finish_steps(job, result, options))

    def compact(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        **options: Unpack[CompactOptions],
    ) -> CompactionOutcome:
        """Plan and, when there is work, summarize (blocking I/O).

        Raises:
            SummaryGenerationError: Every candidate failed and `raise_on_failure` is set.
        """
        return run_sync(self.compact_steps(messages, summary_text, **options))

    async def acompact(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        **options: Unpack[CompactOptions],
    ) -> CompactionOutcome:
        """Async twin of `compact`: the same steps, with every I/O awaited."""
        return await run_async(self.compact_steps(messages, summary_text, **options))
