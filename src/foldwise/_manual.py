"""Manual compaction of a checkpointed thread: `compact_thread` / `acompact_thread`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict, Unpack

from langchain_core.runnables import RunnableConfig
from pydantic import ValidationError

from foldwise._steps import Io, Steps, async_function, sync_function
from foldwise.agent import find_summarization
from foldwise.compaction import CompactionOutcome, CompactionPolicy, CompactionReceipt
from foldwise.config import ContextSize
from foldwise.errors import CompactionDisabledError, ConfigError, ThreadNotFoundError

__all__ = ["acompact_thread", "acompact_thread_outcome", "compact_thread", "compact_thread_outcome"]


def _setup(
    agent: Any, thread_config: RunnableConfig, keep: ContextSize | dict[str, Any] | None
) -> tuple[Any, str, CompactionPolicy | None]:
    middleware = find_summarization(agent)
    if middleware is None or not middleware.enabled:
        raise CompactionDisabledError(
            "compaction is disabled for this agent (summarization.enabled: false, or the agent "
            "was not built with foldwise.create_agent)"
        )
    thread_id = str((thread_config.get("configurable") or {}).get("thread_id") or "")
    if not thread_id:
        raise ThreadNotFoundError("<missing configurable.thread_id>")
    policy = None
    if keep is not None:
        try:
            size = keep if isinstance(keep, ContextSize) else ContextSize.model_validate(keep)
        except ValidationError as err:
            problem = err.errors(include_url=False)[0]
            field = ".".join(str(p) for p in problem["loc"])
            message = str(problem["msg"]).removeprefix("Value error, ")
            raise ConfigError(message, key=f"keep.{field}" if field else "keep") from None
        policy = CompactionPolicy.from_summarization(
            middleware.config.summarization,
            context_window=middleware.policy.context_window,
            keep=size,
        )
    return middleware, thread_id, policy


def _values(snapshot: Any, thread_id: str) -> dict[str, Any]:
    if snapshot is None or not snapshot.config.get("configurable", {}).get("checkpoint_id"):
        raise ThreadNotFoundError(thread_id)
    return dict(snapshot.values or {})


class ManualOptions(TypedDict, total=False):
    """Keyword options of `compact_thread` / `acompact_thread` (see `_outcome_steps`)."""

    force: bool
    keep: ContextSize | dict[str, Any] | None
    model_name: str | None


def _outcome_steps(
    agent: Any,
    thread_config: RunnableConfig,
    *,
    force: bool = True,
    keep: ContextSize | dict[str, Any] | None = None,
    model_name: str | None = None,
    before_write: Callable[[], Awaitable[None]] | None = None,
) -> Steps[CompactionOutcome]:
    """Compact a thread and return the full outcome (including why nothing was done).

    Reads the thread's checkpoint, plans and summarizes with the agent's own
    `SummarizationMiddleware`, writes one checkpoint, then notifies the observers.

    Args:
        agent: An agent built by `foldwise.create_agent`.
        thread_config: `{"configurable": {"thread_id": ...}}`.
        force: Compact even when no trigger fires.
        keep: How much to keep this time (a `ContextSize` or its dict form).
        model_name: The run model to summarize with, when it differs from the default.
        before_write: Awaited (async form only) after the summary exists and right before the
            checkpoint write; raising from it (for example because a lease was lost) cancels
            the write.
    """
    middleware, thread_id, policy = _setup(agent, thread_config, keep)
    snapshot = yield Io.of(agent.get_state, agent.aget_state, thread_config)
    values = _values(snapshot, thread_id)
    outcome: CompactionOutcome = yield from middleware.compact_state_steps(
        values, thread_id=thread_id, force=force, policy=policy, model_name=model_name
    )
    update = outcome.state_update()
    if update is None:
        return outcome
    if before_write is not None:
        yield Io(_sync_guard, before_write)
    yield Io.of(agent.update_state, agent.aupdate_state, thread_config, update)
    middleware.compactor.publish(outcome)
    return outcome


def _sync_guard() -> None:
    raise TypeError("before_write is awaited: use acompact_thread_outcome")


def _receipt_steps(
    agent: Any, thread_config: RunnableConfig, **options: Unpack[ManualOptions]
) -> Steps[CompactionReceipt | None]:
    """Compact a checkpointed thread now, with the same planner as the automatic path.

    Writes one checkpoint on success; returns its receipt, or `None` when there was nothing to
    compact (`acompact_thread_outcome` says why).

    Raises:
        SummaryGenerationError: Every summarizer failed; the thread is unchanged.
        CompactionDisabledError: Summarization is disabled for this agent.
        ThreadNotFoundError: The thread has no checkpoint.
    """
    outcome = yield from _outcome_steps(agent, thread_config, **options)
    return outcome.receipt


compact_thread_outcome = sync_function(_outcome_steps, "compact_thread_outcome")
acompact_thread_outcome = async_function(_outcome_steps, "acompact_thread_outcome")
compact_thread = sync_function(_receipt_steps, "compact_thread")
acompact_thread = async_function(_receipt_steps, "acompact_thread")
