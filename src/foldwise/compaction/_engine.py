"""`Compactor`: plan, summarize, validate and build one state update, for every entry point."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack

from langchain_core.messages import AIMessage, BaseMessage

from foldwise._lru import LRUDict
from foldwise._steps import Io, Steps, run_async, run_sync
from foldwise._telemetry import record_compaction
from foldwise.compaction._outcome import (
    CompactionJob,
    CompactionOutcome,
    CompactOptions,
    SummarizationEvent,
    build_receipt,
    job_prompt,
)
from foldwise.compaction._planner import CompactionDecision, CompactionPlan, decide_compaction
from foldwise.compaction._policy import CompactionPolicy
from foldwise.compaction._presummary import (
    Presummaries,
    post_compaction_limit,
    span_fingerprint,
)
from foldwise.compaction._receipt import CompactionReceipt
from foldwise.compaction._summarize import (
    ModelResolver,
    PromptFor,
    SummaryResult,
    candidate_names,
    summary_steps,
    validate_summary,
)
from foldwise.errors import SummaryGenerationError

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = ["CompactOptions", "CompactionOutcome", "Compactor", "SummarizationEvent"]

Precomputed = tuple[CompactionJob, SummaryResult]
"""A background summary that matches a compaction, and the job (plan) it matches."""

logger = logging.getLogger(__name__)

Archiver = Callable[[Sequence[BaseMessage], "str | None"], "Steps[dict[str, Any] | None]"]
"""Steps that store the messages a compaction removes verbatim; return the artifact reference."""

Offloader = Callable[
    [BaseMessage, "str | None"], "Steps[tuple[BaseMessage, dict[str, Any]] | None]"
]
"""Steps that store a message verbatim; return its preview replacement (same id) and the ref."""


def _nothing(*_args: Any) -> None:
    """The sync form of the background-summary requests: a blocking run has no loop for them."""


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
        presummaries: Background summaries by thread (`policy.presummarize_at`); async runs
            only (docs/compaction.md).
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
    presummaries: Presummaries | None = None
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
        prefer_cut: int | None = None,
    ) -> CompactionDecision:
        """Run only the planner."""
        return decide_compaction(
            messages,
            policy=policy or self.policy,
            summary_text=summary_text,
            counter=self.counter,
            force=force,
            static_tokens=static_tokens,
            prefer_cut=prefer_cut,
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
        overflow = self.offloader is not None
        return job_prompt(plan, summary_text, policy, self.counter, counts_overflow=overflow)

    def _record(self, thread_id: str | None, ok: bool) -> None:
        with self._lock:
            key = thread_id or ""
            self._failures[key] = 0 if ok else self._failures.get(key, 0) + 1

    def _run_hooks(self, job: CompactionJob, result: SummaryResult, thread_id: str | None) -> None:
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
        self,
        job: CompactionJob,
        result: SummaryResult,
        options: CompactOptions,
        *,
        precomputed: bool = False,
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
        receipt = build_receipt(job, result, preserved, refs, archive, options, self.counter)
        receipt = receipt.model_copy(update={"id": receipt_id, "precomputed": precomputed})
        if archive is not None:
            refs.append(archive)
        outcome = CompactionOutcome(
            job.decision, job.plan, result.text, receipt, tuple(preserved), offload_refs=tuple(refs)
        )
        if options.get("publish", True):
            self.publish(outcome)
        return outcome

    def _flush_steps(
        self, job: CompactionJob, result: SummaryResult, thread_id: str | None, receipt_id: str
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
    ) -> CompactionJob | CompactionOutcome:
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
        plan = decision.plan
        return CompactionJob(decision, plan, prompt, replaced, started, names, static_tokens)

    # -- background pre-summarization (docs/compaction.md) ------------------------------------

    def presummarize_steps(
        self,
        messages: Sequence[BaseMessage],
        summary_text: str | None = None,
        **options: Unpack[CompactOptions],
    ) -> Steps[None]:
        """Start summarizing the span the next compaction would remove, in the background.

        Only the async driver does it (the task needs the running loop); the sync one does
        nothing. A thread whose background summary still matches keeps it.
        """
        if self.presummaries is not None and options.get("thread_id"):
            yield Io(_nothing, self._astart_presummary, (messages, summary_text, options))

    async def _astart_presummary(
        self, messages: Sequence[BaseMessage], summary_text: str | None, options: CompactOptions
    ) -> None:
        store, thread_id = self.presummaries, options.get("thread_id")
        if store is None or not thread_id:
            return
        entry = store.get(thread_id)
        if entry is not None and entry.usable() and entry.still_prefix(messages, summary_text):
            return
        ahead: CompactOptions = {**options, "force": True, "decision": None}
        job = self._begin(messages, summary_text, ahead)
        if isinstance(job, CompactionOutcome):
            store.discard(thread_id)
            return
        policy = options.get("policy") or self.policy
        # The fallback stays with the synchronous path: a model that fails in the background
        # is retried there, as it would have been without pre-summarization.
        names = [n for n in job.names if n != self.fallback] or job.names
        steps = summary_steps(
            job.prompt,
            names,
            self.resolve,
            input_tokens=job.replaced,
            count=self.counter.count_text,
            timeout=self.timeout_seconds,
            target_tokens=policy.summary_max_tokens,
        )
        fingerprint = span_fingerprint(job.plan, summary_text, job.names, policy)
        store.start(
            thread_id,
            fingerprint=fingerprint,
            cut=job.plan.cutoff,
            messages=messages,
            summary_text=summary_text,
            steps=steps,
        )
        logger.debug("background summary started (thread %s, cut %d)", thread_id, job.plan.cutoff)

    def _preferred_job(
        self,
        job: CompactionJob,
        cut: int,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        options: CompactOptions,
    ) -> CompactionJob | None:
        """The job re-planned on a background summary's cut, if that is still a valid plan."""
        if job.plan.cutoff == cut:
            return job
        policy = options.get("policy") or self.policy
        decision = self.decide(
            messages,
            summary_text,
            force=options.get("force", False),
            static_tokens=job.static_tokens,
            policy=policy,
            prefer_cut=cut,
        )
        plan, limit = decision.plan, post_compaction_limit(policy)
        if plan is None or plan.cutoff != cut:
            return None
        if limit is not None and plan.estimated_tokens_after > limit:
            return None
        prompt, replaced = self._prompt(plan, summary_text, policy)
        return dataclasses.replace(
            job, decision=decision, plan=plan, prompt=prompt, replaced=replaced
        )

    async def _aprecomputed(
        self,
        job: CompactionJob,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        options: CompactOptions,
    ) -> Precomputed | None:
        """The thread's background summary when it is this compaction's, validated; else None."""
        thread_id = options.get("thread_id")
        entry = self.presummaries.pop(thread_id) if self.presummaries and thread_id else None
        if entry is None:
            return None
        policy = options.get("policy") or self.policy
        chosen = self._preferred_job(job, entry.cut, messages, summary_text, options)
        if chosen is None or entry.fingerprint != span_fingerprint(
            chosen.plan, summary_text, chosen.names, policy
        ):
            entry.cancel()
            logger.info(
                "background summary not used (its span changed, or its cut no longer makes a "
                "valid plan): summarizing now (thread %s)",
                thread_id,
            )
            return None
        result = await Presummaries.aresult(entry)
        if result is None:
            return None
        try:  # the same check as a summary made now: smaller than what it replaces now
            validate_summary(
                AIMessage(content=result.text),
                input_tokens=chosen.replaced,
                count=self.counter.count_text,
            )
        except ValueError as err:
            logger.warning("background summary discarded (thread %s): %s", thread_id, err)
            return None
        return chosen, result

    # -- the pipeline -------------------------------------------------------------------------

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
        automatic = not options.get("manual", False) and options.get("trigger") is None
        if self.presummaries is not None and thread_id and automatic:
            found: Precomputed | None = yield Io(
                _nothing, self._aprecomputed, (job, messages, summary_text, options)
            )
            if found is not None:
                return (yield from self._finish_steps(*found, options, precomputed=True))
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
