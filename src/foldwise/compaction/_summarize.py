"""Summarizer candidates: build, call with a timeout, extract text, validate, fit — in order.

Written once as a step generator (`summary_steps`, see `foldwise._steps`); the model call is
the `Io`. Its sync form runs the blocking call in a fresh daemon thread and waits at most the
timeout; its async form awaits the model's async API under `asyncio.timeout`. The offline
`extractive` fallback runs with no timeout at all: it is deterministic CPU work that always
finishes, and it must keep working when every provider hangs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable

from foldwise._steps import Io, Steps, async_function, sync_function
from foldwise.compaction._prompt import build_condense_prompt
from foldwise.compaction._receipt import SummaryAttempt
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.durable import condense_summary
from foldwise.errors import SummaryGenerationError
from foldwise.messages import is_cut_off_answer

__all__ = [
    "MAX_TIMED_CALLS",
    "SUMMARIZE_TAGS",
    "SummaryResult",
    "agenerate_summary",
    "candidate_names",
    "generate_summary",
    "summary_steps",
    "validate_summary",
]

logger = logging.getLogger(__name__)

SUMMARIZE_TAGS = ["nostream", "foldwise:summarize"]
"""Tags on every summarizer call: `nostream` keeps its tokens out of client streams."""

MAX_TIMED_CALLS = 64
"""Blocking summarizer calls that may run at once, counting those still running past their
timeout. A timed-out blocking call cannot be interrupted: it keeps its thread until the
provider answers. Each call gets a fresh daemon thread rather than a slot in a fixed pool, so
hung calls never queue the next ones behind them (a shared 4-worker pool let four hung calls
make even the offline fallback time out); the cap only stops a provider that never answers
from growing threads without bound, and hitting it fails that candidate with a clear error."""

_slots = threading.BoundedSemaphore(MAX_TIMED_CALLS)

ModelResolver = Callable[[str], BaseChatModel]
PromptFor = Callable[[str], str]
"""The prompt for a candidate name (the offline summarizer may read an untrimmed one)."""


@dataclass(frozen=True)
class SummaryResult:
    """A valid summary and how it was obtained."""

    text: str
    model_name: str
    attempts: tuple[SummaryAttempt, ...]


def candidate_names(
    *,
    configured: str | None,
    run_model: str | None,
    fallback: str | None,
    skip_to_fallback: bool = False,
) -> list[str]:
    """Candidate order: configured summary model, then the run model, then `fallback`.

    With `skip_to_fallback` (after repeated failures) only the fallback is tried, when set.
    """
    if skip_to_fallback and fallback:
        return [fallback]
    names: list[str] = []
    for name in (configured, run_model, fallback):
        if name and name not in names:
            names.append(name)
    return names


def validate_summary(
    response: BaseMessage, *, input_tokens: int, count: Callable[[str], int]
) -> str:
    """Return the summary text of `response`, or raise `ValueError` saying why it is unusable.

    Empty, whitespace-only, tool-call-only, cut-off (a dropped stream) and
    not-smaller-than-its-input summaries fail.
    """
    if is_cut_off_answer(response):
        raise ValueError("the summarizer's answer was cut off before it finished (no end marker)")
    if isinstance(response, AIMessage) and response.tool_calls and not str(response.text).strip():
        raise ValueError("the summarizer answered with tool calls instead of text")
    text = str(response.text).strip()
    if not text:
        raise ValueError("the summary is empty")
    size = count(text)
    if input_tokens > 0 and size >= input_tokens:
        raise ValueError(
            f"the summary ({size} tokens) is not smaller than what it replaces ({input_tokens})"
        )
    return text


def _in_thread(fn: Callable[[Any], Any], arg: Any) -> concurrent.futures.Future[Any]:
    """Start `fn(arg)` in a fresh daemon thread, in the caller's context; its future."""
    slots = _slots  # the one acquired is the one released, whatever `_slots` is by then
    if not slots.acquire(blocking=False):
        raise RuntimeError(
            f"{MAX_TIMED_CALLS} summarizer calls are still running past their timeout; "
            "not starting another until one returns (lower the provider's own request timeout)"
        )
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    # The caller's context keeps the graph's callbacks (tracing, the streaming filter on the
    # `nostream` tag) attached to the call; the thread only enforces the timeout.
    context = contextvars.copy_context()

    def run() -> None:
        try:
            if not future.set_running_or_notify_cancel():
                return  # timed out (and cancelled) before the thread even started
            try:
                result = context.run(fn, arg)
            except BaseException as exc:  # handed to the waiter, who may be gone
                future.set_exception(exc)
            else:
                future.set_result(result)
        finally:
            slots.release()

    threading.Thread(target=run, name="foldwise-summarize", daemon=True).start()
    return future


def _native_async(model: BaseChatModel) -> bool:
    # LangChain's default `_agenerate` runs the blocking `_generate` on the loop's default
    # executor, where a hung call would hold a worker that other async code needs; such
    # models get a thread of their own instead.
    return type(model)._agenerate is not BaseChatModel._agenerate


@dataclass(frozen=True)
class _ModelCall:
    """How to call one candidate: its configured runnable and timeout (`None`: no timeout)."""

    runnable: Runnable[Any, Any]
    timeout: float | None
    native_async: bool

    def request(self, prompt: str) -> Io[BaseMessage]:
        message: list[BaseMessage] = [HumanMessage(content=prompt)]
        if self.timeout is None:
            return Io.call(self.runnable.invoke, message)
        return Io.of(self.invoke, self.ainvoke, message)

    def invoke(self, message: list[BaseMessage]) -> BaseMessage:
        future = _in_thread(self.runnable.invoke, message)
        try:
            return future.result(timeout=self.timeout)  # type: ignore[no-any-return]
        except TimeoutError:
            future.cancel()  # effective only if the thread has not started; it is discarded
            raise

    async def ainvoke(self, message: list[BaseMessage]) -> BaseMessage:
        async with asyncio.timeout(self.timeout):
            if self.native_async:
                return await self.runnable.ainvoke(message)  # type: ignore[no-any-return]
            # Cancelling the wrapper on timeout cancels the thread's future too.
            future = _in_thread(self.runnable.invoke, message)
            response: BaseMessage = await asyncio.wrap_future(future)
            return response


def _model_call(
    name: str, model: BaseChatModel, timeout: float, target_tokens: int | None
) -> _ModelCall:
    offline = name == BUILTIN_EXTRACTIVE
    bound: Runnable[Any, Any] = model
    if offline and target_tokens is not None:
        # The offline summarizer takes a per-call ceiling, as other chat models do.
        bound = model.bind(max_tokens=target_tokens)
    runnable = bound.with_config(
        tags=SUMMARIZE_TAGS, metadata={"lc_source": "summarization"}, run_name="foldwise_summarize"
    )
    return _ModelCall(runnable, None if offline else timeout, _native_async(model))


def _reason(err: Exception, timeout: float) -> str:
    if isinstance(err, TimeoutError):
        return f"timed out after {timeout:g}s"
    return f"{type(err).__name__}: {err}"


def _fit_steps(
    call: _ModelCall,
    name: str,
    summary: str,
    *,
    target_tokens: int,
    count: Callable[[str], int],
    timeout: float,
) -> Steps[str]:
    """An over-target summary: ask the same model once to condense it, then condense it here."""
    size = count(summary)
    if call.timeout is not None:  # the offline summarizer already had the target
        try:
            response = yield call.request(build_condense_prompt(summary, target_tokens))
            shorter = validate_summary(response, input_tokens=size, count=count)
        except Exception as err:  # the summary in hand is still good; condense it below
            logger.warning(
                "summarizer %s could not condense its %d-token summary to %d: %s",
                name,
                size,
                target_tokens,
                _reason(err, timeout),
            )
        else:
            if count(shorter) <= target_tokens:
                return shorter
            summary = shorter
    logger.info(
        "summary from %s is %d tokens, over the %d-token target: condensed without a model",
        name,
        count(summary),
        target_tokens,
    )
    return condense_summary(summary, target_tokens, count=count)


def _candidate_steps(
    name: str,
    prompt: str | PromptFor,
    resolve: ModelResolver,
    *,
    input_tokens: int,
    count: Callable[[str], int],
    timeout: float,
    target_tokens: int | None,
) -> Steps[str]:
    call = _model_call(name, resolve(name), timeout, target_tokens)
    response = yield call.request(prompt if isinstance(prompt, str) else prompt(name))
    summary = validate_summary(response, input_tokens=input_tokens, count=count)
    if target_tokens is None or count(summary) <= target_tokens:
        return summary
    return (
        yield from _fit_steps(
            call, name, summary, target_tokens=target_tokens, count=count, timeout=timeout
        )
    )


def summary_steps(
    prompt: str | PromptFor,
    names: Sequence[str],
    resolve: ModelResolver,
    *,
    input_tokens: int,
    count: Callable[[str], int],
    timeout: float,
    target_tokens: int | None = None,
) -> Steps[SummaryResult]:
    """Try each candidate in order until one returns a valid summary (a step generator).

    Args:
        prompt: The summarizer prompt, or the prompt for a candidate name.
        names: Candidate model names, in order (see `candidate_names`).
        resolve: Returns the chat model for a name.
        input_tokens: Size of what the summary replaces; a summary must be smaller.
        count: Counts a text's tokens.
        timeout: Seconds each model call may take (the offline `extractive` has none).
        target_tokens: The summary's size target. A summary over it is condensed by the same
            model once, then without a model; every section heading is kept.

    Raises:
        SummaryGenerationError: Every candidate failed; carries each attempt's error.
    """
    attempts: list[SummaryAttempt] = []
    for name in names:
        started = time.perf_counter()
        try:
            text = yield from _candidate_steps(
                name,
                prompt,
                resolve,
                input_tokens=input_tokens,
                count=count,
                timeout=timeout,
                target_tokens=target_tokens,
            )
        except Exception as err:  # every failure falls through to the next candidate
            attempts.append(_failed(name, _reason(err, timeout), started))
            logger.warning("summarizer %s failed: %s", name, attempts[-1].error)
            continue
        attempts.append(_ok(name, started))
        return SummaryResult(text, name, tuple(attempts))
    raise SummaryGenerationError(
        "summary generation failed", attempts=[(a.model, a.error or "") for a in attempts]
    )


generate_summary = sync_function(summary_steps, "generate_summary")
"""Run `summary_steps` with blocking calls; raises `SummaryGenerationError` if all fail."""

agenerate_summary = async_function(summary_steps, "agenerate_summary")
"""Run `summary_steps` with the models' async API; never blocks the event loop."""


def _failed(name: str, error: str, started: float) -> SummaryAttempt:
    return SummaryAttempt(
        model=name, ok=False, error=error, duration_ms=(time.perf_counter() - started) * 1000
    )


def _ok(name: str, started: float) -> SummaryAttempt:
    return SummaryAttempt(model=name, ok=True, duration_ms=(time.perf_counter() - started) * 1000)
