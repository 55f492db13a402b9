"""`Compactor`: plan, summarize, validate and build one state update, for every entry point."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from foldwise._lru import LRUDict
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
    agenerate_summary,
    candidate_names,
    generate_summary,
)
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.errors import SummaryGenerationError

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = ["CompactionOutcome", "Compactor", "SummarizationEvent"]

logger = logging.getLogger(__name__)

Archiver = Callable[[Sequence[BaseMessage], "str | None"], "dict[str, Any] | None"]
"""Stores the messages a compaction removes verbatim; returns the artifact reference."""

Offloader = Callable[[BaseMessage, "str | None"], "tuple[BaseMessage, dict[str, Any]] | None"]
"""Stores a message verbatim; returns its preview replacement (same id) and the reference."""


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
        return prompt_for, replaced

    def _record(self, thread_id: str | None, ok: bool) -> None:
        with self._lock:
            key = thread_id or ""
            self._failures[key] = 0 if ok else self._failures.get(key, 0) + 1

    def _finish(
        self,
        decision: CompactionDecision,
        plan: CompactionPlan,
        result: SummaryResult,
        *,
        thread_id: str | None,
        run_id: str | None,
        manual: bool,
        started: float,
        trigger: str | None,
        static_tokens: int,
    ) -> CompactionOutcome:
        self._record(thread_id, ok=True)
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
        preserved, refs = self._offload_overflow(plan, thread_id)
        offloaded = [str(ref.get("artifact_id")) for ref in refs]
        archive = self._archive(plan, thread_id)
        if archive is not None:
            refs.append(archive)
        # Estimated afresh: the usage anchor behind tokens_before does not survive the removal.
        after = (
            static_tokens
            + self.counter.count_text(result.text)
            + self.counter.count_messages(preserved, anchor=False)
        )
        receipt = CompactionReceipt(
            thread_id=thread_id,
            run_id=run_id,
            manual=manual,
            trigger=trigger or plan.trigger,
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
            duration_ms=(time.perf_counter() - started) * 1000,
            offloaded_ids=offloaded,
            archive_id=str(archive["artifact_id"]) if archive else None,
        )
        logger.info("%s", receipt.log_line())
        for observer in self.observers:
            try:
                observer(receipt)
            except Exception:
                logger.exception("compaction observer failed (thread %s)", thread_id)
        return CompactionOutcome(
            decision, plan, result.text, receipt, tuple(preserved), offload_refs=tuple(refs)
        )

    def _archive(self, plan: CompactionPlan, thread_id: str | None) -> dict[str, Any] | None:
        if self.archiver is None:
            return None
        try:
            return self.archiver(plan.to_summarize, thread_id)
        except Exception:
            logger.exception("archiving compacted messages failed (thread %s)", thread_id)
            return None

    def _offload_overflow(
        self, plan: CompactionPlan, thread_id: str | None
    ) -> tuple[list[BaseMessage], list[dict[str, Any]]]:
        preserved = list(plan.preserved)
        if not plan.human_overflow_ids or self.offloader is None:
            return preserved, []
        overflow = set(plan.human_overflow_ids)
        refs: list[dict[str, Any]] = []
        for index, message in enumerate(preserved):
            if str(message.id) not in overflow:
                continue
            try:
                stored = self.offloader(message, thread_id)
            except Exception:
                logger.exception(
                    "offloading user message %s failed (thread %s)", message.id, thread_id
                )
                continue
            if stored is not None:
                preserved[index], ref = stored
                refs.append(ref)
        return preserved, refs

    def _fail(
        self,
        decision: CompactionDecision,
        plan: CompactionPlan,
        err: SummaryGenerationError,
        *,
        thread_id: str | None,
        raise_on_failure: bool,
    ) -> CompactionOutcome:
        self._record(thread_id, ok=False)
        if raise_on_failure:
            raise err
        logger.error(
            "compaction skipped this turn, every summarizer failed (thread %s): %s", thread_id, err
        )
        return CompactionOutcome(decision, plan, error=err)

    def _begin(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        *,
        force: bool,
        static_tokens: int,
        policy: CompactionPolicy | None,
        decision: CompactionDecision | None,
        thread_id: str | None,
        model_name: str | None,
    ) -> _Job | CompactionOutcome:
        """Plan and build the prompt; an outcome when there is nothing to summarize."""
        started = time.perf_counter()
        policy = policy or self.policy
        if decision is None:
            decision = self.decide(
                messages, summary_text, force=force, static_tokens=static_tokens, policy=policy
            )
        if decision.plan is None:
            return CompactionOutcome(decision)
        prompt, replaced = self._prompt(decision.plan, summary_text, policy)
        names = self._names(thread_id, model_name)
        return _Job(decision, decision.plan, prompt, replaced, started, names, static_tokens)

    def _end(
        self,
        job: _Job,
        result: SummaryResult | SummaryGenerationError,
        *,
        thread_id: str | None,
        run_id: str | None,
        manual: bool,
        raise_on_failure: bool,
        trigger: str | None,
    ) -> CompactionOutcome:
        if isinstance(result, SummaryGenerationError):
            return self._fail(
                job.decision,
                job.plan,
                result,
                thread_id=thread_id,
                raise_on_failure=raise_on_failure,
            )
        return self._finish(
            job.decision,
            job.plan,
            result,
            thread_id=thread_id,
            run_id=run_id,
            manual=manual,
            started=job.started,
            trigger=trigger,
            static_tokens=job.static_tokens,
        )

    def compact(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        *,
        force: bool = False,
        static_tokens: int = 0,
        policy: CompactionPolicy | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        model_name: str | None = None,
        manual: bool = False,
        raise_on_failure: bool = False,
        trigger: str | None = None,
        decision: CompactionDecision | None = None,
    ) -> CompactionOutcome:
        """Plan and, when there is work, summarize; never mutates state itself.

        A `decision` already computed by `decide` with the same inputs skips re-planning.

        Raises:
            SummaryGenerationError: Every candidate failed and `raise_on_failure` is set.
        """
        job = self._begin(
            messages,
            summary_text,
            force=force,
            static_tokens=static_tokens,
            policy=policy,
            decision=decision,
            thread_id=thread_id,
            model_name=model_name,
        )
        if isinstance(job, CompactionOutcome):
            return job
        result: SummaryResult | SummaryGenerationError
        try:
            result = generate_summary(
                job.prompt,
                job.names,
                self.resolve,
                input_tokens=job.replaced,
                count=self.counter.count_text,
                timeout=self.timeout_seconds,
            )
        except SummaryGenerationError as err:
            result = err
        return self._end(
            job,
            result,
            thread_id=thread_id,
            run_id=run_id,
            manual=manual,
            raise_on_failure=raise_on_failure,
            trigger=trigger,
        )

    async def acompact(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        *,
        force: bool = False,
        static_tokens: int = 0,
        policy: CompactionPolicy | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        model_name: str | None = None,
        manual: bool = False,
        raise_on_failure: bool = False,
        trigger: str | None = None,
        decision: CompactionDecision | None = None,
    ) -> CompactionOutcome:
        """Async twin of `compact`."""
        job = self._begin(
            messages,
            summary_text,
            force=force,
            static_tokens=static_tokens,
            policy=policy,
            decision=decision,
            thread_id=thread_id,
            model_name=model_name,
        )
        if isinstance(job, CompactionOutcome):
            return job
        result: SummaryResult | SummaryGenerationError
        try:
            result = await agenerate_summary(
                job.prompt,
                job.names,
                self.resolve,
                input_tokens=job.replaced,
                count=self.counter.count_text,
                timeout=self.timeout_seconds,
            )
        except SummaryGenerationError as err:
            result = err
        return self._end(
            job,
            result,
            thread_id=thread_id,
            run_id=run_id,
            manual=manual,
            raise_on_failure=raise_on_failure,
            trigger=trigger,
        )
