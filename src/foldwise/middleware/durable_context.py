"""`DurableContextMiddleware`: capture durable facts before compaction, project them as data."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, NotRequired, TypedDict, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from foldwise._incremental import NewMessages
from foldwise._lru import LRUDict
from foldwise._thread_id import resolve_thread_id
from foldwise.config import FoldwiseConfig
from foldwise.durable._channels import BUILTIN_CHANNELS, DurableChannel, render_sections
from foldwise.durable._delegations import (
    DELEGATION_TOOL_NAMES,
    changed_delegations,
    extract_delegations,
)
from foldwise.durable._render import inject_durable_context, inject_recall, place_recall
from foldwise.durable._skills import SKILL_METADATA_KEY, extract_skills, skill_metadata
from foldwise.state import FoldwiseState

__all__ = ["DurableContextMiddleware"]

logger = logging.getLogger(__name__)

ToolResult = ToolMessage | Command[Any]


class DurableContextMiddleware(AgentMiddleware[FoldwiseState, Any, Any]):
    """Keeps the summary, delegated work, loaded skills and stored artifacts in view.

    Capture runs in `before_model` (placed before the summarization middleware, so nothing is
    compacted before it is recorded) and `after_model`; the projection runs in
    `wrap_model_call` on every call, retries included, and never touches stored `messages`.
    The block is one hidden data message after the leading system messages, preceded by a
    static authority contract; every value in it is escaped.

    Args:
        skills_root: Root under which `SKILL.md` reads are recognised.
        skill_read_tools: Tool names whose reads count (`[]` disables skill capture).
        delegation_tools: Tool names that delegate to sub-agents.
        channels: Extra application channels, rendered after the built-in ones.
        merge_contract: Put the static contract into the single leading system message, for
            providers that accept only one (untrusted text never goes there either way).
    """

    def __init__(
        self,
        *,
        skills_root: str = "/mnt/skills",
        skill_read_tools: Sequence[str] = ("read_file", "read", "view", "cat"),
        delegation_tools: Sequence[str] = tuple(DELEGATION_TOOL_NAMES),
        channels: Sequence[DurableChannel] = (),
        merge_contract: bool = False,
    ) -> None:
        super().__init__()
        self.skills_root = skills_root
        self.skill_read_tools = frozenset(skill_read_tools)
        self.delegation_tools = frozenset(delegation_tools)
        self.custom_channels = tuple(channels)
        self.channels = (*BUILTIN_CHANNELS, *self.custom_channels)
        self.merge_contract = merge_contract
        self._watched = self.delegation_tools | self.skill_read_tools
        self._new = NewMessages()
        self._projected = NewMessages()
        self._rendered: LRUDict[str, tuple[tuple[Any, ...], list[str]]] = LRUDict(1024)
        if self.custom_channels:
            fields: dict[str, Any] = {}
            for channel in self.custom_channels:
                annotation: Any = channel.default
                if channel.reducer is not None:
                    annotation = Annotated[annotation, channel.reducer]
                fields[channel.key] = NotRequired[annotation]
            self.state_schema = cast(Any, TypedDict("DurableCustomState", fields))  # type: ignore[operator]

    @classmethod
    def from_config(cls, config: FoldwiseConfig, **kwargs: Any) -> DurableContextMiddleware:
        """Build from the `skills:` and `summarization:` blocks."""
        return cls(
            skills_root=config.skills.container_path,
            skill_read_tools=config.summarization.skill_file_read_tool_names,
            **kwargs,
        )

    # -- capture -----------------------------------------------------------------------------

    def _capture(self, state: Any, *, skills: bool) -> dict[str, Any] | None:
        messages = list(state.get("messages") or [])
        update: dict[str, Any] = {}
        found = extract_delegations(messages, tool_names=self.delegation_tools)
        changed = changed_delegations(state.get("delegations") or [], found)
        if changed:
            update["delegations"] = changed
        if skills and self.skill_read_tools:
            known = {e.get("path"): e.get("loaded_at") for e in state.get("skill_context") or []}
            entries = [
                e
                for e in extract_skills(
                    messages, root=self.skills_root, tool_names=self.skill_read_tools
                )
                if known.get(e["path"]) != e["loaded_at"]
            ]
            if entries:
                update["skill_context"] = entries
        update.update(self._capture_custom(messages, state) or {})
        return update or None

    def _capture_custom(self, messages: list[AnyMessage], state: Any) -> dict[str, Any] | None:
        update: dict[str, Any] = {}
        for channel in self.custom_channels:
            if channel.capture is None:
                continue
            try:
                value = channel.capture(messages, state)
            except Exception:
                logger.exception("capture of durable channel %s failed", channel.key)
                continue
            if value is not None:
                update[channel.key] = value
        return update or None

    def new_run(self, thread_key: str) -> None:
        """Scan the whole history on the next call (a run starts: the history may be edited).

        `SummarizationMiddleware.before_agent` calls this for the agent's own durable
        middleware; between runs, `update_state` can replace any message.
        """
        self._new.forget(thread_key)
        self._projected.forget(thread_key)

    def _relevant(self, message: AnyMessage) -> bool:
        """Whether a message can change the delegation or skill channels."""
        if isinstance(message, AIMessage):
            return any(call.get("name") in self._watched for call in message.tool_calls)
        if isinstance(message, ToolMessage):
            return (
                message.name is None
                or message.name in self._watched
                or SKILL_METADATA_KEY in message.additional_kwargs
            )
        return False

    def before_model(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record delegations, skill reads and custom channels before compaction can run.

        Only messages added since the previous call are looked at when the history merely
        grew; the built-in channels are re-extracted only when one of those can change them.
        """
        messages = state.get("messages") or []
        new = self._new.since(resolve_thread_id(runtime), messages)
        if new is not None and not any(map(self._relevant, new)):
            if not self.custom_channels:
                return None
            return self._capture_custom(list(messages), state)
        return self._capture(state, skills=True)

    async def abefore_model(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model` (no I/O)."""
        return self.before_model(state, runtime)

    def after_model(self, state: FoldwiseState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record delegations dispatched by the model's latest answer (in progress)."""
        last = state["messages"][-1] if state.get("messages") else None
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return None
        if not any(call.get("name") in self.delegation_tools for call in last.tool_calls):
            return None
        update = self._capture(state, skills=False)
        return (
            {"delegations": update["delegations"]} if update and "delegations" in update else None
        )

    async def aafter_model(
        self, state: FoldwiseState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_model`."""
        return self.after_model(state, runtime)

    # -- skill reads are stamped at the tool boundary -------------------------------------

    def _stamp(self, request: ToolCallRequest, result: ToolResult) -> ToolResult:
        if not isinstance(result, ToolMessage) or not self.skill_read_tools:
            return result
        meta = skill_metadata(
            dict(request.tool_call), result, root=self.skills_root, tool_names=self.skill_read_tools
        )
        if meta is not None:
            result.additional_kwargs = {**result.additional_kwargs, SKILL_METADATA_KEY: meta}
        return result

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        """Stamp successful `SKILL.md` reads with their path and front-matter description."""
        return self._stamp(request, handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Async twin of `wrap_tool_call`."""
        return self._stamp(request, await handler(request))

    # -- projection -----------------------------------------------------------------------

    def _sections(self, state: Any, key: str) -> list[str]:
        """The rendered sections; the built-in ones reused while their inputs hold.

        A built-in channel's block changes only when its value changes or compaction removes
        messages (what its "gone from context" filter looks for); re-rendering it on every call
        would make the per-call cost grow with the conversation. Application channels are
        rendered on every call: their filters may depend on any message.
        """
        messages = state.get("messages") or []
        # The value objects themselves: LangGraph hands the same object until it is written.
        values = (
            messages[0].id if messages else None,
            *(state.get(c.key) for c in BUILTIN_CHANNELS),
        )
        cached = self._rendered.get(key)
        new = self._projected.since(key, messages)
        if (
            cached is not None
            and new is not None
            and all(a is b or a == b for a, b in zip(cached[0], values, strict=True))
        ):
            builtin = cached[1]
        else:
            builtin = render_sections(state, BUILTIN_CHANNELS)
            self._rendered[key] = (values, builtin)
        if not self.custom_channels:
            return builtin
        return [*builtin, *render_sections(state, self.custom_channels)]

    def project(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with the durable data block rendered from its state (state untouched)."""
        state = request.state
        key = resolve_thread_id(request.runtime)
        sections = self._sections(state, key) if isinstance(state, dict) else []
        memory = state.get("memory_context") if isinstance(state, dict) else None
        sections, recall = place_recall(sections, memory)
        if not sections:
            return request
        messages, system = inject_durable_context(
            request.messages,
            sections,
            system_message=request.system_message,
            merge_contract=self.merge_contract,
        )
        if recall:
            messages = inject_recall(messages, recall)
        return request.override(messages=cast(list[AnyMessage], messages), system_message=system)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Add the durable data block to this request only."""
        return handler(self.project(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        return await handler(self.project(request))
