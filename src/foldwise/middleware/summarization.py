"""`SummarizationMiddleware`: compaction before model calls, DeerFlow's semantics plus fixes."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.runtime import Runtime

from foldwise._lru import LRUDict
from foldwise._steps import Io, Steps, async_method, run_async, run_sync, sync_method
from foldwise._thread_id import NO_THREAD, resolve_thread_id
from foldwise.compaction import (
    CompactionOutcome,
    CompactionPolicy,
    CompactionReceipt,
    CompactOptions,
    Compactor,
    Presummaries,
    SummarizationEvent,
    presummary_due,
)
from foldwise.config import FoldwiseConfig
from foldwise.durable import is_durable_data_message, summary_for_context
from foldwise.errors import CompactionDisabledError
from foldwise.messages import ensure_message_ids
from foldwise.middleware import _request_fit as fit
from foldwise.middleware._calibration import Calibration
from foldwise.middleware._request_fit import is_context_overflow
from foldwise.middleware.durable_context import DurableContextMiddleware
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware
from foldwise.models import ModelRegistry
from foldwise.state import FoldwiseState
from foldwise.tokens import TokenCounter, get_counter

__all__ = ["RUN_MODEL_ALIAS", "SummarizationMiddleware", "is_context_overflow"]

logger = logging.getLogger(__name__)

RUN_MODEL_ALIAS = "run-model"
"""Candidate name of a run model passed as an instance rather than by configured name."""

_MAX_OVERFLOW_RETRIES = 2


def _summary_of(state: Any) -> str | None:
    value = state.get("summary_text") if isinstance(state, dict) else None
    return value if isinstance(value, str) else None


class SummarizationMiddleware(AgentMiddleware[FoldwiseState, Any, Any]):
    """Compacts the agent's history before a model call when a trigger or the budget says so.

    The summary goes to the `summary_text` channel (rendered as data by the durable-context
    middleware, or by this one when used alone), never into `messages`. A failed summary
    changes nothing. Use `from_config(config)` or pass the pieces directly. With
    `summarization.presummarize_at`, async runs summarize the next compaction's span in the
    background (docs/compaction.md); `aclose` cancels what still runs.

    Args:
        config: The foldwise configuration (defaults apply when omitted).
        model: The run model as an instance (its name is `run_model_name` or `run-model`).
        run_model_name: The configured name of the run model.
        registry: Resolves candidate model names (built from `config` when omitted).
        policy: Overrides the thresholds resolved from `config`.
        counter: The run model's token counter.
        static_tokens: Tokens of the system prompt and tool schemas, used until the first model
            call measures them.
        hooks: `before_summarization` callbacks.
        observers: Called with every committed `CompactionReceipt`.
        offload: The agent's `ToolOutputOffloadMiddleware`, if any: oversized user input is
            stored before the compaction decision (so it is planned at its preview size), and
            preserved user input over `preserve_human.max_tokens` is stored verbatim instead of
            being kept whole.
        durable: The agent's `DurableContextMiddleware`, if any: an overflow retry renders
            its channels (custom ones included) again for the compacted state.
    """

    state_schema = FoldwiseState

    def __init__(
        self,
        *,
        config: FoldwiseConfig | None = None,
        model: BaseChatModel | None = None,
        run_model_name: str | None = None,
        registry: ModelRegistry | None = None,
        policy: CompactionPolicy | None = None,
        counter: TokenCounter | None = None,
        static_tokens: int = 0,
        hooks: Sequence[Callable[[SummarizationEvent], None]] = (),
        observers: Sequence[Callable[[CompactionReceipt], None]] = (),
        offload: ToolOutputOffloadMiddleware | None = None,
        durable: DurableContextMiddleware | None = None,
    ) -> None:
        super().__init__()
        self.offload = offload
        self.durable = durable
        self._projector: DurableContextMiddleware | None = durable
        self.config = config or FoldwiseConfig()
        settings = self.config.summarization
        self.enabled = settings.enabled
        overrides: dict[str, BaseChatModel] = {}
        run_name = run_model_name or (RUN_MODEL_ALIAS if model is not None else None)
        if run_name is None and self.config.models:
            run_name = self.config.models[0].name
        if model is not None and run_name is not None:
            overrides[run_name] = model
        self.registry = registry or ModelRegistry(self.config, overrides=overrides)
        self.run_model_name = run_name
        entry = self.config.model(run_name) if run_name else None
        self.counter = counter or get_counter(entry, config=self.config)
        window = entry.context_window if entry else None
        if window is None and model is not None:
            window = fit.profile_window(model)
        self.policy = policy or CompactionPolicy.from_config(
            self.config, model_name=run_name, context_window=window
        )
        self.compactor = Compactor(
            policy=self.policy,
            resolve=self.registry.get,
            counter=self.counter,
            summary_model=settings.model_name,
            run_model=run_name,
            fallback=settings.fallback,
            timeout_seconds=settings.timeout_seconds,
            fallback_after_failures=settings.fallback_after_failures,
            hooks=list(hooks),
            observers=list(observers),
            offloader=offload.offload_user_message_steps if offload is not None else None,
            archiver=offload.archive_steps if offload is not None else None,
            presummaries=Presummaries() if self.policy.presummarize_at else None,
        )
        self.max_compactions_per_run = settings.max_compactions_per_run
        self._initial_static = static_tokens
        self._static: LRUDict[str, int] = LRUDict()
        self._run_counts: LRUDict[str, int] = LRUDict()
        self.calibration = Calibration(self.policy)
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, config: FoldwiseConfig, *, run_model_name: str | None = None, **kwargs: Any
    ) -> SummarizationMiddleware:
        """Build from a configuration; keyword arguments as for the constructor."""
        return cls(config=config, run_model_name=run_model_name, **kwargs)

    # -- per-thread calibration -------------------------------------------------------------

    def _planning_policy(
        self, key: str, messages: Sequence[BaseMessage], static: int, summary: str | None
    ) -> CompactionPolicy:
        """The window as is when the count is anchored on provider usage, else calibrated."""
        if self.calibration.scale(key) == 1.0:
            return self.policy
        rendered = summary_for_context(summary) if summary else ""
        count = self.counter.count_request(
            messages, static_tokens=static + self.counter.count_text(rendered)
        )
        return self.policy if count.anchored else self.calibration.policy_for(key)

    # -- compaction (before each model call) -------------------------------------------------

    def _prepare(
        self, state: FoldwiseState, runtime: Runtime[Any], pre: dict[str, Any] | None
    ) -> tuple[str, CompactOptions, list[BaseMessage], str | None] | None:
        if not self.enabled:
            return None
        messages: Sequence[BaseMessage] = state["messages"]
        if pre:
            # Oversized user input was just stored: plan on its preview, not on its full size.
            replaced = {m.id: m for m in pre.get("messages", [])}
            messages = [replaced.get(m.id, m) for m in messages]
        key = resolve_thread_id(runtime)
        static = self._static.get(key, self._initial_static)
        summary = state.get("summary_text")
        policy = self._planning_policy(key, messages, static, summary)
        decision = self.compactor.decide(messages, summary, static_tokens=static, policy=policy)
        plan = decision.plan
        if plan is None:  # below the trigger; past `presummarize_at` of it: summarize ahead
            if not presummary_due(decision, len(messages) + bool(summary), policy):
                return None
        else:
            with self._lock:
                done = self._run_counts.get(key, 0)
            if done >= self.max_compactions_per_run and plan.trigger != "budget":
                logger.info(
                    "compaction skipped: %d compactions already this run (thread %s)", done, key
                )
                return None
        messages = list(messages)
        ensure_message_ids(messages)
        options: CompactOptions = {
            "static_tokens": static,
            "thread_id": key,
            "run_id": fit.run_id(),
            "decision": decision,
            "policy": policy,
        }
        return key, options, messages, summary

    def _commit(
        self, key: str, outcome: CompactionOutcome, pre: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        update = outcome.state_update()
        if update is None:
            return pre
        with self._lock:
            self._run_counts[key] = self._run_counts.get(key, 0) + 1
        if pre and pre.get("offloads"):
            update["offloads"] = [*pre["offloads"], *update.get("offloads", [])]
        return update

    def before_agent(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start a new run: reset the per-run compaction count and the incremental scans."""
        key = resolve_thread_id(runtime)
        with self._lock:
            self._run_counts[key] = 0
        self.calibration.new_run(key)
        if self.durable is not None:
            self.durable.new_run(key)
        if self.offload is not None:
            self.offload.new_run(key)
        return None

    async def abefore_agent(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent` (no I/O)."""
        return self.before_agent(state, runtime)

    def before_model_steps(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> Steps[dict[str, Any] | None]:
        """Compact when a trigger fires or the next request would not fit.

        The offload middleware's pasted-input check runs first, so oversized user input is
        planned at its preview size. `before_model` / `abefore_model` run these steps.
        """
        pre = None
        if self.offload is not None:
            pre = yield from self.offload.before_model_steps(state, runtime)
        prepared = self._prepare(state, runtime, pre)
        if prepared is None:
            return pre
        key, options, messages, summary = prepared
        decision = options.get("decision")
        if decision is None or decision.plan is None:
            if key != NO_THREAD:  # a run without a thread id has nothing to come back to
                yield from self.compactor.presummarize_steps(messages, summary, **options)
            return pre
        outcome = yield from self.compactor.compact_steps(messages, summary, **options)
        return self._commit(key, outcome, pre)

    async def aclose(self) -> None:
        """Cancel this middleware's background summaries and wait for them (on shutdown)."""
        if self.compactor.presummaries is not None:
            await self.compactor.presummaries.aclose()

    before_model = sync_method(before_model_steps)  # type: ignore[arg-type]
    abefore_model = async_method(before_model_steps)  # type: ignore[arg-type]

    # -- manual compaction ------------------------------------------------------------------

    def compact_state_steps(
        self,
        state: FoldwiseState,
        *,
        thread_id: str | None = None,
        force: bool = True,
        policy: CompactionPolicy | None = None,
        model_name: str | None = None,
    ) -> Steps[CompactionOutcome]:
        """Manual compaction of a state snapshot, as steps; observers are not notified."""
        if not self.enabled:
            raise CompactionDisabledError("compaction is disabled (summarization.enabled: false)")
        messages = list(state.get("messages") or [])
        ensure_message_ids(messages)
        key = thread_id or NO_THREAD
        return (
            yield from self.compactor.compact_steps(
                messages,
                state.get("summary_text"),
                force=force,
                policy=policy or self.calibration.policy_for(key),
                static_tokens=self._static.get(key, self._initial_static),
                thread_id=thread_id,
                model_name=model_name,
                manual=True,
                raise_on_failure=True,
                publish=False,
            )
        )

    def compact_state(self, state: FoldwiseState, **options: Any) -> CompactionOutcome:
        """Manual compaction of a state snapshot; raises `SummaryGenerationError` on failure.

        Keyword options as for `compact_state_steps`. Observers are notified by the caller
        once the update is written (`self.compactor.publish(outcome)`).
        """
        return run_sync(self.compact_state_steps(state, **options))

    async def acompact_state(self, state: FoldwiseState, **options: Any) -> CompactionOutcome:
        """Async twin of `compact_state`."""
        return await run_async(self.compact_state_steps(state, **options))

    # -- the request itself (every model call) ----------------------------------------------

    def _project(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """Render the durable channels into a request that has no data block yet.

        Used without a `DurableContextMiddleware`, the built-in channels are rendered by a
        private one, so the summary never silently disappears.
        """
        if self._projector is None:
            self._projector = self.durable or DurableContextMiddleware()
        return self._projector.project(request)

    def _measure_and_fit(
        self, request: ModelRequest[Any], policy: CompactionPolicy | None = None
    ) -> tuple[ModelRequest[Any], int]:
        """Record the request's static size, render durable data if nobody did, fit the budget.

        Returns the request to send and its estimated total.
        """
        if self.durable is None and not any(
            is_durable_data_message(m) for m in request.messages[: fit.split_head(request.messages)]
        ):
            request = self._project(request)
        key = resolve_thread_id(request.runtime)
        static, conversation, lead = fit.measure(request, self.counter)
        summary = _summary_of(request.state)
        rendered = summary_for_context(summary) if summary else ""
        planner_static = static - (self.counter.count_text(rendered) if rendered else 0)
        with self._lock:
            self._static[key] = max(0, planner_static)
        total = static + conversation
        budget = (policy or self.calibration.policy_for(key)).budget_limit
        if budget is None:
            return request, total
        over = total - budget
        if policy is None:
            over = self._provider_excess(request, lead, static, total, over)
        if over <= 0:
            return request, total
        messages = list(request.messages)
        body, left = fit.clip_largest(messages[lead:], over, self.counter)
        if left > 0:
            logger.warning(
                "request still %d tokens over the budget after clipping (thread %s)", left, key
            )
        return request.override(messages=[*messages[:lead], *body]), budget + max(0, left)

    def _provider_excess(
        self, request: ModelRequest[Any], lead: int, static: int, total: int, over: int
    ) -> int:
        """The excess in estimate units, judged on provider usage when the count is anchored.

        The planner trusts a verified usage anchor; the fitter must agree with it, or a request
        the provider measures well inside the window gets its tool results clipped.
        """
        budget = self.policy.budget_limit
        conversation = request.messages[lead:] if lead else request.messages
        count = self.counter.count_request(conversation, static_tokens=static)
        if budget is None or not count.anchored or count.total <= 0:
            return over
        return int((count.total - budget) * total / count.total)

    def _retry_request(
        self, request: ModelRequest[Any], outcome: CompactionOutcome | None
    ) -> ModelRequest[Any]:
        """The request again from the compacted state, its durable block rendered afresh."""
        if outcome is None or outcome.summary_text is None:
            return request
        return self._project(fit.compacted_request(request, outcome))

    def _overflow_policy(
        self, request: ModelRequest[Any], error: BaseException, estimated: int
    ) -> CompactionPolicy:
        """Recalibrate the thread from the provider's refusal and return the shrunk policy."""
        key = resolve_thread_id(request.runtime)
        limit, counted = fit.overflow_numbers(error)
        current = self.calibration.scale(key)
        scale = self.calibration.refusal(key, counted, estimated)
        logger.warning(
            "context overflow (thread %s): provider window %s, request %s tokens, estimate %d; "
            "planning with %.2fx the estimate from now on",
            key,
            limit,
            counted,
            estimated,
            scale,
        )
        window = limit or self.policy.context_window or int(estimated * current)
        return self.calibration.retry_policy(key, window, counted)

    def _overflow_compaction_steps(
        self, request: ModelRequest[Any], policy: CompactionPolicy
    ) -> Steps[CompactionOutcome | None]:
        messages = list(request.state.get("messages") or [])
        if not messages or not self.enabled:
            return None
        key = resolve_thread_id(request.runtime)
        outcome = yield from self.compactor.compact_steps(
            messages,
            _summary_of(request.state),
            force=True,
            trigger="overflow",
            policy=policy,
            static_tokens=self._static.get(key, self._initial_static),
            thread_id=key,
            run_id=fit.run_id(),
            publish=False,  # observers hear of it once the retry's answer commits it
        )
        return outcome if outcome.compacted else None

    def _model_call_steps(
        self, request: ModelRequest[Any], handler: Callable[..., Any]
    ) -> Steps[ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]]:
        """Measure, fit and send; on provider overflow compact to its numbers and retry."""
        sent, estimated = self._measure_and_fit(request)
        outcome: CompactionOutcome | None = None
        for attempt in range(_MAX_OVERFLOW_RETRIES + 1):
            try:
                response = yield Io.handler(handler, sent)
            except Exception as err:
                if not is_context_overflow(err):
                    raise
                if attempt == _MAX_OVERFLOW_RETRIES:
                    thread = resolve_thread_id(request.runtime)
                    raise ContextOverflowError(
                        "the request still exceeds the provider's window after compaction and "
                        f"clipping ({attempt} retries, thread {thread}): {err}"
                    ) from err
                policy = self._overflow_policy(request, err, estimated)
                if outcome is None:
                    outcome = yield from self._overflow_compaction_steps(request, policy)
                sent, estimated = self._measure_and_fit(
                    self._retry_request(request, outcome), policy
                )
                continue
            response = self._after_response(sent, response, estimated)
            if outcome is None:
                return cast(ModelResponse[Any] | AIMessage, response)
            self.compactor.publish(outcome)
            return fit.with_commit(response, outcome)
        raise AssertionError("unreachable")  # pragma: no cover

    def _after_response(self, sent: ModelRequest[Any], response: Any, estimated: int) -> Any:
        """Refuse a cut-off answer; stamp it with its usage and learn the provider's scale.

        The stamp lets a later count (in this process or another) anchor on the provider's
        exact figure only while the messages before the answer are still these.
        """
        fit.check_complete(response, key := resolve_thread_id(sent.runtime))
        lead = fit.split_head(sent.messages)
        static = self._static.get(key, 0) + self.counter.count_text(
            summary_for_context(_summary_of(sent.state) or "")
        )
        conversation = sent.messages[lead:] if lead else sent.messages
        results = response.result if isinstance(response, ModelResponse) else [response]
        stamped: list[BaseMessage] = []
        for message in results:
            usage = getattr(message, "usage_metadata", None)
            if isinstance(message, AIMessage) and usage and usage.get("input_tokens"):
                self.calibration.usage(key, int(usage["input_tokens"]), estimated)
                message = self.counter.stamp_usage(message, conversation, static_tokens=static)
            stamped.append(message)
        if isinstance(response, ModelResponse):
            return dataclasses.replace(response, result=stamped)
        return stamped[0]

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Measure, fit and send the request; on a context overflow compact and retry."""
        return run_sync(self._model_call_steps(request, handler))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        return await run_async(self._model_call_steps(request, handler))
