"""`MemoryMiddleware`: long-term memory in an agent — injection, tools, and the passive writer.

- Injection (`before_agent`, once per run): the user's profile (the most important active
  facts, in a stable order) and the facts the run's latest user message recalls, written to
  the ``memory_context`` channel only when they change; `DurableContextMiddleware` renders the
  channel inside the durable data block (escaped, behind the authority contract, never a
  system message), and the compaction budget counts it with the rest of the request.
- Tool mode (`mode: tool | both`): the `memory_search` / `memory_add` / `memory_update` /
  `memory_delete` tools are added to the agent.
- Passive writer (`mode: middleware | both`, `after_agent`): the run's user inputs and final
  answers go to `MemoryManager.remember`. Memory failures are logged and never fail the run.

The namespace is the run's identity only (``configurable.user_id``, which the gateway sets
from the authenticated user) and the configured agent name; never a tool argument.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage
from langgraph.runtime import Runtime

from foldwise._crash import crash_point
from foldwise._steps import Io, Steps, run_async, run_sync
from foldwise._thread_id import current_config
from foldwise.config import FoldwiseConfig
from foldwise.errors import FoldwiseError
from foldwise.memory import MemoryManager, namespace_for
from foldwise.memory._identity import resolve_namespace, resolve_user_id
from foldwise.memory._inject import memory_context_steps
from foldwise.memory._pipeline import MemoryPipeline
from foldwise.memory._thread import run_source
from foldwise.memory._tools import memory_tools
from foldwise.messages import is_real_user_message, message_text
from foldwise.state import FoldwiseState
from foldwise.tokens import get_counter

__all__ = ["QUEUED_THROUGH_KEY", "MemoryMiddleware", "run_slice", "unread_span"]

logger = logging.getLogger(__name__)

_QUERY_CHARS = 500


QUEUED_THROUGH_KEY = "memory_queued_through"
"""State key: the id of the last message memory has queued (the next run reads after it)."""


def unread_span(messages: Sequence[BaseMessage], through: object) -> list[BaseMessage]:
    """The messages after `through` (the last one queued before), else all of them.

    No marker (memory's first run on the thread, or the runs before it failed) or a marker
    that compaction removed gives the whole history: re-reading is harmless, since candidates
    from messages already behind a fact are deduplicated.
    """
    if not through:
        return list(messages)
    index = next((i for i, m in enumerate(messages) if m.id == through), None)
    return list(messages) if index is None else list(messages[index + 1 :])


def run_slice(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages of the latest run: from its first user input to the end."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if is_real_user_message(messages[i])), None
    )
    if last is None:
        return []
    start = last
    while start > 0 and is_real_user_message(messages[start - 1]):
        start -= 1
    return list(messages[start:])


class MemoryMiddleware(AgentMiddleware[FoldwiseState, Any, Any]):
    """Injects long-term memory into each run, offers the memory tools, and remembers.

    Args:
        manager: The memory (`MemoryManager.from_config(config)`).
        agent: The agent part of the namespace.
        mode: ``middleware`` (passive writer), ``tool`` (tools only), or ``both``.
        inject: Show the profile and recall in the durable data block.
        max_tokens: The memory section's token budget (profile and recall together).
        recall_k: At most this many recalled facts (0: profile only).
        profile_share: The profile's share of `max_tokens`.
        count: Counts a text's tokens (default: the default counter).
        pipeline: The write queue: `after_agent` only enqueues the run's slice and a worker
            applies it (`None`: `after_agent` applies it itself).
    """

    def __init__(
        self,
        manager: MemoryManager,
        *,
        agent: str = "agent",
        mode: Literal["middleware", "tool", "both"] = "middleware",
        inject: bool = True,
        max_tokens: int = 1500,
        recall_k: int = 8,
        profile_share: float = 0.6,
        count: Callable[[str], int] | None = None,
        pipeline: MemoryPipeline | None = None,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.manager = manager
        self.agent = agent
        self.mode = mode
        self.inject = inject
        self.max_tokens = max_tokens
        self.recall_k = recall_k
        self.profile_share = profile_share
        self.count = count or get_counter().count_text
        self.tools = memory_tools(manager, agent) if mode in ("tool", "both") else []
        self._ready = False

    @classmethod
    def from_config(
        cls, config: FoldwiseConfig, *, manager: MemoryManager | None = None, **kwargs: Any
    ) -> MemoryMiddleware:
        """Build from the `memory:` block (a manager over the configured backend by default)."""
        memory = config.memory
        return cls(
            manager or MemoryManager.from_config(config),
            agent=memory.agent,
            mode=memory.mode,
            inject=memory.injection.enabled,
            max_tokens=memory.injection.max_tokens,
            recall_k=memory.injection.recall_k,
            profile_share=memory.injection.profile_share,
            **kwargs,
        )

    # -- injection ------------------------------------------------------------------------------

    def _context_steps(self, state: Any) -> Steps[dict[str, Any] | None]:
        user = resolve_user_id(current_config())
        namespaces = [namespace_for(user, self.agent), namespace_for(user, None)]
        messages = list(state.get("messages") or [])
        query = next(
            (message_text(m) for m in reversed(messages) if is_real_user_message(m)), ""
        ).strip()[:_QUERY_CHARS]
        value = yield from memory_context_steps(
            self.manager,
            namespaces,
            query,
            max_tokens=self.max_tokens,
            recall_k=self.recall_k,
            profile_share=self.profile_share,
            count=self.count,
        )
        if not value["text"] and not state.get("memory_context"):
            return None
        return None if state.get("memory_context") == value else {"memory_context": value}

    def _ready_steps(self) -> Steps[None]:
        """Set the backend up on first use (idempotent): a manager built from config is not."""
        if not self._ready:
            yield Io.of(self.manager.setup, self.manager.asetup)
            self._ready = True

    def _inject_steps(self, state: Any) -> Steps[dict[str, Any] | None]:
        try:
            yield from self._ready_steps()
            if not self.inject:
                return None
            return (yield from self._context_steps(state))
        except FoldwiseError as exc:
            logger.warning("memory injection skipped: %s", exc)
            return None

    def before_agent(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Write the memory section for this run when it changed."""
        return run_sync(self._inject_steps(state))

    async def abefore_agent(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        return await run_async(self._inject_steps(state))

    # -- passive writer -------------------------------------------------------------------------

    def _remember_steps(self, state: Any) -> Steps[dict[str, Any] | None]:
        if self.mode == "tool":
            return None
        config = current_config()
        messages = list(state.get("messages") or [])
        try:
            yield from self._ready_steps()
            namespace = resolve_namespace(config, self.agent)
            span = unread_span(messages, state.get(QUEUED_THROUGH_KEY))
            source = run_source(config, via=self.manager.extractor.name)
            if self.pipeline is not None:
                crash_point("memory.enqueue.before")  # tests only
                yield from self.pipeline.enqueue_steps(
                    namespace, span, thread_id=source.thread_id, run_id=source.run_id
                )
                crash_point("memory.enqueue.after")  # tests only
            else:
                yield from self.manager.remember_steps(namespace, span, source=source)
        except FoldwiseError as exc:
            logger.warning("memory not updated for this run: %s", exc)
            return None
        last = messages[-1].id if messages else None
        return (
            {QUEUED_THROUGH_KEY: last} if last and last != state.get(QUEUED_THROUGH_KEY) else None
        )

    def after_agent(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Queue what the run's user inputs and answers say about the user.

        Everything after the last message a previous run queued is read, so the input of a
        run that failed before this hook is read by the next one.
        """
        return run_sync(self._remember_steps(state))

    async def aafter_agent(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        return await run_async(self._remember_steps(state))
