"""Summarizer candidates: build, call with a timeout, extract text, validate — in order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise.compaction._receipt import SummaryAttempt
from foldwise.errors import SummaryGenerationError

__all__ = [
    "SUMMARIZE_TAGS",
    "SummaryResult",
    "agenerate_summary",
    "candidate_names",
    "generate_summary",
    "validate_summary",
]

logger = logging.getLogger(__name__)

SUMMARIZE_TAGS = ["nostream", "foldwise:summarize"]
"""Tags on every summarizer call: `nostream` keeps its tokens out of client streams."""

_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="foldwise-sum")

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

    Empty, whitespace-only, tool-call-only, and not-smaller-than-its-input summaries fail.
    """
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


def _prepare(model: BaseChatModel, prompt: str) -> tuple[object, list[BaseMessage]]:
    runnable = model.with_config(
        tags=SUMMARIZE_TAGS, metadata={"lc_source": "summarization"}, run_name="foldwise_summarize"
    )
    return runnable, [HumanMessage(content=prompt)]


def generate_summary(
    prompt: str | PromptFor,
    names: Sequence[str],
    resolve: ModelResolver,
    *,
    input_tokens: int,
    count: Callable[[str], int],
    timeout: float,
) -> SummaryResult:
    """Try each candidate in order until one returns a valid summary.

    Raises:
        SummaryGenerationError: Every candidate failed; carries each attempt's error.
    """
    attempts: list[SummaryAttempt] = []
    for name in names:
        started = time.perf_counter()
        try:
            model = resolve(name)
            runnable, request = _prepare(model, prompt if isinstance(prompt, str) else prompt(name))
            # Run in the caller's context so the graph's callbacks (tracing, streaming filter
            # on the `nostream` tag) still see the call; the thread only enforces the timeout.
            context = contextvars.copy_context()
            future = _EXECUTOR.submit(context.run, runnable.invoke, request)  # type: ignore[attr-defined]
            response = future.result(timeout=timeout)
            text = validate_summary(response, input_tokens=input_tokens, count=count)
        except concurrent.futures.TimeoutError:
            attempts.append(_failed(name, f"timed out after {timeout:g}s", started))
        except Exception as err:  # every failure falls through to the next candidate
            attempts.append(_failed(name, f"{type(err).__name__}: {err}", started))
        else:
            attempts.append(_ok(name, started))
            return SummaryResult(text, name, tuple(attempts))
        logger.warning("summarizer %s failed: %s", name, attempts[-1].error)
    raise SummaryGenerationError(
        "summary generation failed", attempts=[(a.model, a.error or "") for a in attempts]
    )


async def agenerate_summary(
    prompt: str | PromptFor,
    names: Sequence[str],
    resolve: ModelResolver,
    *,
    input_tokens: int,
    count: Callable[[str], int],
    timeout: float,  # noqa: ASYNC109 - the per-candidate budget, enforced with wait_for
) -> SummaryResult:
    """Async twin of `generate_summary`."""
    attempts: list[SummaryAttempt] = []
    for name in names:
        started = time.perf_counter()
        try:
            model = resolve(name)
            runnable, request = _prepare(model, prompt if isinstance(prompt, str) else prompt(name))
            response = await asyncio.wait_for(
                runnable.ainvoke(request),  # type: ignore[attr-defined]
                timeout=timeout,
            )
            text = validate_summary(response, input_tokens=input_tokens, count=count)
        except TimeoutError:
            attempts.append(_failed(name, f"timed out after {timeout:g}s", started))
        except Exception as err:  # every failure falls through to the next candidate
            attempts.append(_failed(name, f"{type(err).__name__}: {err}", started))
        else:
            attempts.append(_ok(name, started))
            return SummaryResult(text, name, tuple(attempts))
        logger.warning("summarizer %s failed: %s", name, attempts[-1].error)
    raise SummaryGenerationError(
        "summary generation failed", attempts=[(a.model, a.error or "") for a in attempts]
    )


def _failed(name: str, error: str, started: float) -> SummaryAttempt:
    return SummaryAttempt(
        model=name, ok=False, error=error, duration_ms=(time.perf_counter() - started) * 1000
    )


def _ok(name: str, started: float) -> SummaryAttempt:
    return SummaryAttempt(model=name, ok=True, duration_ms=(time.perf_counter() - started) * 1000)
