"""`SummarizationMiddleware`: compaction before model calls, DeerFlow's semantics plus fixes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents import AgentState
from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from foldwise._lru import LRUDict
from foldwise.compaction import (
    CompactionOutcome,
    CompactionPolicy,
    CompactionReceipt,
    Compactor,
    SummarizationEvent,
)
from foldwise.config import FoldwiseConfig
from foldwise.durable import inject_durable_context, is_durable_data_message, render_sections
from foldwise.errors import CompactionDisabledError
from foldwise.messages import ensure_message_ids, message_text
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware
from foldwise.models import ModelRegistry
from foldwise.state import FoldwiseState
from foldwise.tokens import TokenCounter, get_counter

__all__ = ["RUN_MODEL_ALIAS", "SummarizationMiddleware", "is_context_overflow"]

logger = logging.getLogger(__name__)

RUN_MODEL_ALIAS = "run-model"
"""Candidate name of a run model passed as an instance rather than by configured name."""

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)
_CLIP_NOTE = "\n[… {count:,} characters clipped from this view to fit the context window …]\n"


def is_context_overflow(error: BaseException) -> bool:
    """Whether a provider error says the request did not fit the model's window."""
    if isinstance(error, ContextOverflowError):
        return True
    if getattr(error, "code", None) in ("context_length_exceeded", "string_above_max_length"):
        return True
    text = str(error).lower()
    return any(marker in text for marker in _OVERFLOW_MARKERS)


def _profile_window(model: BaseChatModel) -> int | None:
    """The model's LangChain profile `max_input_tokens`, when it declares one."""
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _summary_of(state: Any) -> str | None:
    value = state.get("summary_text") if isinstance(state, dict) else None
    return value if isinstance(value, str) else None


def _run_id() -> str | None:
    """The current run's id, when the caller put one in the config (the gateway does)."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    value = (config.get("metadata") or {}).get("run_id") or config.get("run_id")
    return str(value) if value else None


def _thread_id(runtime: Any) -> str | None:
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread:
        return str(thread)
    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:
        return None
    value = configurable.get("thread_id")
    return str(value) if value is not None else None


class SummarizationMiddleware(AgentMiddleware[FoldwiseState, Any, Any]):
    """Compacts the agent's history before a model call when a trigger or the budget says so.

    The summary goes to the `summary_text` channel (rendered as data by the durable-context
    middleware, or by this one when used alone), never into `messages`. A failed summary
    changes nothing. Use `from_config(config)` or pass the pieces directly.

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
    ) -> None:
        super().__init__()
        self.offload = offload
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
            window = _profile_window(model)
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
            offloader=offload.offload_user_message if offload is not None else None,
            archiver=offload.archive_messages if offload is not None else None,
        )
        self.max_compactions_per_run = settings.max_compactions_per_run
        self._initial_static = static_tokens
        self._static: LRUDict[str, int] = LRUDict()
        self._run_counts: LRUDict[str, int] = LRUDict()
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, config: FoldwiseConfig, *, run_model_name: str | None = None, **kwargs: Any
    ) -> SummarizationMiddleware:
        """Build from a configuration; keyword arguments as for the constructor."""
        return cls(config=config, run_model_name=run_model_name, **kwargs)

    # -- compaction (before each model call) -------------------------------------------------

    def _prepare(
        self, state: FoldwiseState, runtime: Runtime[Any], pre: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]] | None:
        if not self.enabled:
            return None
        messages = list(state["messages"])
        ensure_message_ids(messages)
        if pre:
            # Oversized user input was just stored: plan on its preview, not on its full size.
            replaced = {m.id: m for m in pre.get("messages", [])}
            messages = [replaced.get(m.id, m) for m in messages]
        key = _thread_id(runtime) or ""
        static = self._static.get(key, self._initial_static)
        summary = state.get("summary_text")
        decision = self.compactor.decide(messages, summary, static_tokens=static)
        plan = decision.plan
        if plan is None:
            return None
        with self._lock:
            done = self._run_counts.get(key, 0)
        if done >= self.max_compactions_per_run and plan.trigger != "budget":
            logger.info(
                "compaction skipped: %d compactions already this run (thread %s)", done, key
            )
            return None
        return key, {
            "messages": messages,
            "summary_text": summary,
            "static_tokens": static,
            "thread_id": key or None,
            "run_id": _run_id(),
            "decision": decision,
        }

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
        """Start a new run: reset the per-run compaction count."""
        with self._lock:
            self._run_counts[_thread_id(runtime) or ""] = 0
        return None

    async def abefore_agent(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        return self.before_agent(state, runtime)

    def before_model(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Compact when a trigger fires or the next request would not fit."""
        pre = self.offload.before_model(state, runtime) if self.offload is not None else None
        prepared = self._prepare(state, runtime, pre)
        if prepared is None:
            return pre
        key, kwargs = prepared
        return self._commit(key, self.compactor.compact(**kwargs), pre)

    async def abefore_model(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        pre = None
        if self.offload is not None:
            pre = await self.offload.abefore_model(state, runtime)
        prepared = self._prepare(state, runtime, pre)
        if prepared is None:
            return pre
        key, kwargs = prepared
        return self._commit(key, await self.compactor.acompact(**kwargs), pre)

    # -- manual compaction ------------------------------------------------------------------

    def _manual(
        self,
        state: FoldwiseState,
        thread_id: str | None,
        force: bool,
        policy: CompactionPolicy | None,
        model_name: str | None,
    ) -> dict[str, Any]:
        if not self.enabled:
            raise CompactionDisabledError("compaction is disabled (summarization.enabled: false)")
        messages = list(state.get("messages") or [])
        ensure_message_ids(messages)
        return {
            "messages": messages,
            "summary_text": state.get("summary_text"),
            "force": force,
            "policy": policy,
            "static_tokens": self._static.get(thread_id or "", self._initial_static),
            "thread_id": thread_id,
            "model_name": model_name,
            "manual": True,
            "raise_on_failure": True,
        }

    def compact_state(
        self,
        state: FoldwiseState,
        *,
        thread_id: str | None = None,
        force: bool = True,
        policy: CompactionPolicy | None = None,
        model_name: str | None = None,
    ) -> CompactionOutcome:
        """Manual compaction of a state snapshot; raises `SummaryGenerationError` on failure."""
        kwargs = self._manual(state, thread_id, force, policy, model_name)
        return self.compactor.compact(**kwargs)

    async def acompact_state(
        self,
        state: FoldwiseState,
        *,
        thread_id: str | None = None,
        force: bool = True,
        policy: CompactionPolicy | None = None,
        model_name: str | None = None,
    ) -> CompactionOutcome:
        """Async twin of `compact_state`."""
        kwargs = self._manual(state, thread_id, force, policy, model_name)
        return await self.compactor.acompact(**kwargs)

    # -- the request itself (every model call) ----------------------------------------------

    def _measure_and_fit(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """Record the request's static size, render durable data if nobody did, fit the budget."""
        summary = _summary_of(request.state)
        messages: list[AnyMessage] = list(request.messages)
        if not any(is_durable_data_message(m) for m in messages):
            # Used without DurableContextMiddleware (or on an overflow retry): render the
            # built-in channels ourselves so the summary never silently disappears.
            sections = render_sections(request.state)
            if sections:
                projected, system = inject_durable_context(
                    messages, sections, system_message=request.system_message
                )
                messages = cast(list[AnyMessage], projected)
                request = request.override(messages=messages, system_message=system)
        static = self.counter.count_tools(request.tools)
        if request.system_message is not None:
            static += self.counter.count_message(request.system_message)
        for message in messages:
            if is_durable_data_message(message) or message.type == "system":
                static += self.counter.count_message(message)
        if summary:
            static = max(0, static - self.counter.count_text(summary))
        key = _thread_id(request.runtime) or ""
        with self._lock:
            self._static[key] = static
        budget = self.policy.budget_limit
        if budget is None:
            return request
        total = static + self.counter.count_messages(messages, anchor=False)
        if total <= budget:
            return request
        return request.override(messages=self._clip_largest(messages, total - budget))

    def _clip_largest(self, messages: list[AnyMessage], excess: int) -> list[AnyMessage]:
        """Clip the largest tool results in this view (state keeps them whole) until it fits."""
        order = sorted(
            (i for i, m in enumerate(messages) if isinstance(m, ToolMessage)),
            key=lambda i: self.counter.count_message(messages[i]),
            reverse=True,
        )
        out = list(messages)
        for index in order:
            if excess <= 0:
                break
            message = out[index]
            text = message_text(message)
            tokens = self.counter.count_message(message)
            keep_tokens = max(200, tokens - excess)
            keep_chars = int(len(text) * keep_tokens / max(1, tokens))
            if keep_chars >= len(text):
                continue
            head = keep_chars * 2 // 3
            tail = keep_chars - head
            clipped = (
                text[:head]
                + _CLIP_NOTE.format(count=len(text) - keep_chars)
                + (text[-tail:] if tail else "")
            )
            out[index] = message.model_copy(update={"content": clipped})
            excess -= tokens - self.counter.count_message(out[index])
            logger.warning("clipped tool result %s to fit the context window", message.id)
        return out

    def _overflow_compaction(self, request: ModelRequest[Any]) -> CompactionOutcome | None:
        messages = list(request.state.get("messages") or [])
        if not messages or not self.enabled:
            return None
        return self.compactor.compact(
            messages,
            _summary_of(request.state),
            force=True,
            trigger="overflow",
            thread_id=_thread_id(request.runtime),
        )

    async def _aoverflow_compaction(self, request: ModelRequest[Any]) -> CompactionOutcome | None:
        messages = list(request.state.get("messages") or [])
        if not messages or not self.enabled:
            return None
        return await self.compactor.acompact(
            messages,
            _summary_of(request.state),
            force=True,
            trigger="overflow",
            thread_id=_thread_id(request.runtime),
        )

    def _retry_request(
        self, request: ModelRequest[Any], outcome: CompactionOutcome
    ) -> ModelRequest[Any]:
        # The durable block of the failed request holds the old summary: drop it (and its
        # contract) and render the durable channels again with the new summary.
        new_state = cast(AgentState[Any], {**request.state, "summary_text": outcome.summary_text})
        retry = request.override(
            messages=cast(list[AnyMessage], list(outcome.preserved)), state=new_state
        )
        return self._measure_and_fit(retry)

    @staticmethod
    def _with_commit(
        response: ModelResponse[Any] | AIMessage, outcome: CompactionOutcome
    ) -> ExtendedModelResponse[Any]:
        update = outcome.state_update() or {}
        result = (
            response if isinstance(response, ModelResponse) else ModelResponse(result=[response])
        )
        # The compaction write re-adds the response after the preserved messages, because the
        # remove-all in it would otherwise drop the model's own answer of this step.
        update["messages"] = [*update.get("messages", []), *result.result]
        return ExtendedModelResponse(model_response=result, command=Command(update=update))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Measure, fit and send the request; on a context overflow compact once and retry."""
        request = self._measure_and_fit(request)
        try:
            return handler(request)
        except Exception as err:
            if not is_context_overflow(err):
                raise
            outcome = self._overflow_compaction(request)
            if outcome is None or not outcome.compacted:
                raise
            logger.warning("context overflow: compacted and retrying once (%s)", err)
            return self._with_commit(handler(self._retry_request(request, outcome)), outcome)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        request = self._measure_and_fit(request)
        try:
            return await handler(request)
        except Exception as err:
            if not is_context_overflow(err):
                raise
            outcome = await self._aoverflow_compaction(request)
            if outcome is None or not outcome.compacted:
                raise
            logger.warning("context overflow: compacted and retrying once (%s)", err)
            response = await handler(self._retry_request(request, outcome))
            return self._with_commit(response, outcome)
