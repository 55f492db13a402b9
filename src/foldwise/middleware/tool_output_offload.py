"""`ToolOutputOffloadMiddleware`: oversized tool output and pasted input go to the artifact store.

- Tool results (`wrap_tool_call` / `awrap_tool_call`): a result above `tool_token_limit` is
  written to the store first; only then is the `ToolMessage` text replaced by a notice naming the
  artifact and a head-and-tail preview. The message keeps its id, `tool_call_id`, name and status
  and gets `additional_kwargs["foldwise_offload"] = ref`. If the write fails, the text is clipped
  inline with a note instead (flag `foldwise_clipped`), so no reference ever points at nothing.
- User input (`before_model`): a `HumanMessage` above `human_token_limit` is stored verbatim and
  replaced, under the same id, by a notice and preview. Smaller input is never touched.
- Every offload is recorded in the `offloads` state channel (reducer `merge_offloads`).
- The `read_offloaded` and `search_offloaded` tools are added to the agent.

Each hook is written once as a step generator (`wrap_tool_call_steps`, `before_model_steps`,
`offload_user_message_steps`, `archive_steps`; see `foldwise._steps`): the sync hooks run it with
blocking store calls, the async hooks with the store's `a`-methods only. Every thread id comes
from `foldwise._thread_id.resolve_thread_id`, the resolver the read/search tools use.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, NotRequired, Self

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command

from foldwise._incremental import CheckedTexts, NewMessages
from foldwise._steps import Io, Steps, given_async, given_sync, perform, run_async, run_sync
from foldwise._thread_id import resolve_thread_id
from foldwise.config import FoldwiseConfig, OffloadConfig
from foldwise.messages import OFFLOAD_FLAG
from foldwise.offload import (
    CLIPPED_FLAG,
    ArtifactRef,
    ArtifactStore,
    FilesystemArtifactStore,
    StoreArtifactStore,
    clipped_text,
    merge_offloads,
    offload_tools,
    offloaded_text,
    replace_message_text,
    split_content,
)
from foldwise.tokens import estimate_tokens

__all__ = ["OffloadState", "ToolOutputOffloadMiddleware"]

logger = logging.getLogger(__name__)

DEFAULT_EXEMPT_TOOLS = ("read_offloaded", "search_offloaded")


class OffloadState(AgentState[Any]):
    """Agent state with the `offloads` channel (newest 50 offload references)."""

    offloads: NotRequired[Annotated[list[dict[str, Any]], merge_offloads]]


_INLINE_CHARS = 32_000
"""Tool results up to this size are measured on the calling thread (the loop, when async)."""


def _content_chars(result: object) -> int:
    """Characters of a tool result's string content (a cheap size hint, no tokenizing)."""
    messages = [result] if isinstance(result, ToolMessage) else []
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = list(result.update.get("messages") or [])
    total = 0
    for message in messages:
        content = getattr(message, "content", "")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(str(part)) for part in content)
    return total


class ToolOutputOffloadMiddleware(AgentMiddleware[OffloadState, Any, Any]):
    """Keeps oversized tool results and pasted input out of the context, recoverably.

    Args:
        store: Where artifacts go: an `ArtifactStore`, or a LangGraph `BaseStore` (wrapped in a
            `StoreArtifactStore`). Default: a `FilesystemArtifactStore` under `root`.
        root: Filesystem root used when `store` is omitted.
        enabled: Master switch; when false nothing is offloaded and no tools are added.
        tool_token_limit: Tool results above this many tokens are offloaded; `0` disables.
        human_token_limit: User messages above this many tokens are offloaded; `0` disables.
        exempt_tools: Tools whose results are never offloaded.
        preview_chars: Size of the head-and-tail preview.
        max_bytes_per_thread: Quota of the default filesystem store.
        add_tools: Register `read_offloaded` / `search_offloaded` with the agent.
        count_tokens: Token estimate of a text (default `foldwise.tokens.estimate_tokens`).
    """

    state_schema = OffloadState

    def __init__(
        self,
        *,
        store: ArtifactStore | BaseStore | None = None,
        root: str = ".foldwise/artifacts",
        enabled: bool = True,
        archive_compacted: bool = True,
        tool_token_limit: int = 5000,
        human_token_limit: int = 50000,
        exempt_tools: Sequence[str] = DEFAULT_EXEMPT_TOOLS,
        preview_chars: int = 4000,
        max_bytes_per_thread: int | None = None,
        add_tools: bool = True,
        count_tokens: Callable[[str], int] = estimate_tokens,
    ) -> None:
        super().__init__()
        if tool_token_limit < 0 or human_token_limit < 0:
            raise ValueError("token limits must be >= 0 (0 disables)")
        if isinstance(store, BaseStore):
            store = StoreArtifactStore(store, max_bytes_per_thread=max_bytes_per_thread)
        self.store: ArtifactStore = store or FilesystemArtifactStore(
            root, max_bytes_per_thread=max_bytes_per_thread
        )
        self.enabled = enabled
        self.archive_compacted = archive_compacted
        self.tool_token_limit = tool_token_limit
        self.human_token_limit = human_token_limit
        self.exempt_tools = frozenset(exempt_tools)
        self.preview_chars = preview_chars
        self.count_tokens = count_tokens
        self._new = NewMessages()
        self._small = CheckedTexts()  # user messages found under the limit at a run start
        self.tools = offload_tools(self.store) if enabled and add_tools else []

    @classmethod
    def from_config(
        cls,
        config: FoldwiseConfig | OffloadConfig,
        *,
        store: ArtifactStore | BaseStore | None = None,
        add_tools: bool = True,
    ) -> Self:
        """Build the middleware from `foldwise.yaml`'s `offload` block."""
        offload = config.offload if isinstance(config, FoldwiseConfig) else config
        # Every constructor option the offload block has, under the same name.
        fields = type(offload).model_fields
        options = {n: getattr(offload, n) for n in inspect.signature(cls).parameters if n in fields}
        return cls(store=store, add_tools=add_tools, **options)

    # -- tool results ----------------------------------------------------------------------

    def _tool_candidates(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> list[tuple[ToolMessage, str, int]]:
        """Tool messages in `result` whose text is over the limit, with that text and its size."""
        if not self.enabled or self.tool_token_limit <= 0:
            return []
        if request.tool_call.get("name") in self.exempt_tools:
            return []
        if isinstance(result, ToolMessage):
            messages: list[Any] = [result]
        elif isinstance(result, Command) and isinstance(result.update, dict):
            messages = list(result.update.get("messages") or [])
        else:
            return []
        found: list[tuple[ToolMessage, str, int]] = []
        for message in messages:
            if not isinstance(message, ToolMessage) or message.name in self.exempt_tools:
                continue
            if message.additional_kwargs.get(OFFLOAD_FLAG):
                continue
            text, _ = split_content(message.content)
            tokens = self.count_tokens(text)
            if tokens > self.tool_token_limit:
                found.append((message, text, tokens))
        return found

    def _replacement(
        self,
        message: ToolMessage,
        text: str,
        tokens: int,
        ref: ArtifactRef | None,
        error: BaseException | None,
        thread_id: str,
    ) -> ToolMessage:
        source = message.name or "tool"
        if ref is not None:
            new_text = offloaded_text(text, ref, preview_chars=self.preview_chars)
            return replace_message_text(message, new_text, flag_value=ref.to_dict())
        logger.error(
            "offload: storing the output of tool %s (%d chars) failed in thread %s; clipped "
            "inline instead: %s",
            source,
            len(text),
            thread_id,
            error,
        )
        new_text = clipped_text(
            text, source=source, tokens=tokens, preview_chars=self.preview_chars
        )
        info = {"chars": len(text), "tokens": tokens, "source": source, "reason": str(error)[:200]}
        return replace_message_text(message, new_text, flag=CLIPPED_FLAG, flag_value=info)

    @staticmethod
    def _assemble(
        result: ToolMessage | Command[Any],
        replaced: dict[int, ToolMessage],
        refs: list[ArtifactRef],
    ) -> ToolMessage | Command[Any]:
        events = [ref.to_dict() for ref in refs]
        if isinstance(result, ToolMessage):
            message = replaced.get(id(result), result)
            if not events:
                return message
            return Command(update={"messages": [message], "offloads": events})
        update = dict(result.update) if isinstance(result.update, dict) else {}
        update["messages"] = [replaced.get(id(m), m) for m in update.get("messages") or []]
        if events:
            update["offloads"] = merge_offloads(update.get("offloads"), events)
        return dataclasses.replace(result, update=update)

    @staticmethod
    def _meta(message: BaseMessage) -> dict[str, str]:
        meta = {"message_id": message.id or ""}
        if isinstance(message, ToolMessage):
            meta["tool_call_id"] = message.tool_call_id
        return {k: v for k, v in meta.items() if v}

    def wrap_tool_call_steps(
        self, request: ToolCallRequest, call: Io[ToolMessage | Command[Any]]
    ) -> Steps[ToolMessage | Command[Any]]:
        """Run the tool (`call`), then offload its result if it is too large."""
        result = yield from perform(call)
        # Measuring and previewing a large result is CPU work: off the event loop when large.
        big = _content_chars(result) > _INLINE_CHARS
        candidates = yield (Io.call if big else Io.pure)(self._tool_candidates, request, result)
        if not candidates:
            return result
        thread_id = resolve_thread_id(request.runtime)
        replaced: dict[int, ToolMessage] = {}
        refs: list[ArtifactRef] = []
        for message, text, tokens in candidates:
            ref: ArtifactRef | None = None
            error: Exception | None = None
            try:
                ref = yield from self.store.put_steps(
                    thread_id,
                    text,
                    source=message.name or "tool",
                    kind="tool",
                    meta=self._meta(message),
                )
                refs.append(ref)
            except Exception as exc:  # any store failure: clip inline, log, keep the run going
                error = exc
            replaced[id(message)] = yield Io.call(
                self._replacement, message, text, tokens, ref, error, thread_id
            )
        return self._assemble(result, replaced, refs)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool, then offload its result if it is too large."""
        return run_sync(self.wrap_tool_call_steps(request, given_sync(handler, request)))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of `wrap_tool_call`."""
        return await run_async(self.wrap_tool_call_steps(request, given_async(handler, request)))

    # -- pasted user input -----------------------------------------------------------------

    def new_run(self, thread_key: str) -> None:
        """Look at the whole history on the next call (a run starts; it may have been edited)."""
        self._new.forget(thread_key)

    def _human_candidates(self, state: Any, thread_id: str) -> list[tuple[HumanMessage, str]]:
        """User messages over the limit, among those added since the previous call."""
        if not self.enabled or self.human_token_limit <= 0:
            return []
        messages = (state.get("messages") if isinstance(state, dict) else None) or []
        new = self._new.since(thread_id, messages)
        found: list[tuple[HumanMessage, str]] = []
        for message in messages if new is None else new:
            if not isinstance(message, HumanMessage) or not message.id:
                continue
            if message.additional_kwargs.get(OFFLOAD_FLAG):
                continue
            text, _ = split_content(message.content)
            if self._small.known(thread_id, message.id, text):
                continue  # the history decoded anew: counted at an earlier run start
            if self.count_tokens(text) > self.human_token_limit:
                found.append((message, text))
            else:
                self._small.add(thread_id, message.id, text)
        return found

    def _human_update(
        self, pairs: list[tuple[HumanMessage, str, ArtifactRef]]
    ) -> dict[str, Any] | None:
        if not pairs:
            return None
        messages = [
            replace_message_text(
                message,
                offloaded_text(text, ref, preview_chars=self.preview_chars),
                flag_value=ref.to_dict(),
            )
            for message, text, ref in pairs
        ]
        return {"messages": messages, "offloads": [ref.to_dict() for _, _, ref in pairs]}

    def _human_failed(self, message: HumanMessage, thread_id: str, exc: Exception) -> None:
        # User input is never clipped: without a stored copy the message stays as it is.
        logger.error(
            "offload: storing user message %s failed in thread %s; left in place: %s",
            message.id,
            thread_id,
            exc,
        )

    def before_model_steps(
        self, state: OffloadState, runtime: Runtime[Any]
    ) -> Steps[dict[str, Any] | None]:
        """Offload user messages above `human_token_limit` (stored first, then replaced).

        Only messages added since the previous call are checked (the whole history at the
        start of a run), so the check costs what is new, not the history's length.
        """
        thread_id = resolve_thread_id(runtime)
        candidates = self._human_candidates(state, thread_id)
        if not candidates:
            return None
        done: list[tuple[HumanMessage, str, ArtifactRef]] = []
        for message, text in candidates:
            try:
                ref = yield from self.store.put_steps(
                    thread_id, text, source="human", kind="human", meta=self._meta(message)
                )
            except Exception as exc:  # leave the message untouched, log, keep going
                self._human_failed(message, thread_id, exc)
                continue
            done.append((message, text, ref))
        return self._human_update(done)

    def before_model(self, state: OffloadState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Offload user messages above `human_token_limit` (stored first, then replaced)."""
        return run_sync(self.before_model_steps(state, runtime))

    async def abefore_model(
        self, state: OffloadState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `before_model`."""
        return await run_async(self.before_model_steps(state, runtime))

    # -- used by the summarization middleware ------------------------------------------------

    def offload_user_message_steps(
        self, message: BaseMessage, thread_id: str | None
    ) -> Steps[tuple[BaseMessage, dict[str, Any]] | None]:
        """Store a user message verbatim and return its preview replacement and reference.

        Compaction runs this for preserved user input above `preserve_human.max_tokens`: it is
        stored, never paraphrased. Returns `None` (message left as it is) when offloading is
        disabled or the store fails. Without `thread_id`, the run's thread is resolved as the
        read/search tools resolve it, so they find the stored text.
        """
        if not self.enabled or not isinstance(message, HumanMessage):
            return None
        if message.additional_kwargs.get(OFFLOAD_FLAG):
            return None
        text, _ = split_content(message.content)
        thread = thread_id or resolve_thread_id()
        try:
            ref = yield from self.store.put_steps(
                thread, text, source="human", kind="human", meta=self._meta(message)
            )
        except Exception as exc:  # leave the message untouched, log, keep going
            self._human_failed(message, thread, exc)
            return None
        replacement = replace_message_text(
            message,
            offloaded_text(text, ref, preview_chars=self.preview_chars),
            flag_value=ref.to_dict(),
        )
        return replacement, ref.to_dict()

    def offload_user_message(
        self, message: BaseMessage, thread_id: str | None
    ) -> tuple[BaseMessage, dict[str, Any]] | None:
        """Blocking form of `offload_user_message_steps`."""
        return run_sync(self.offload_user_message_steps(message, thread_id))

    def archive_steps(
        self, messages: Sequence[BaseMessage], thread_id: str | None
    ) -> Steps[dict[str, Any] | None]:
        """Store messages removed by a compaction verbatim, as one searchable transcript.

        The summary is lossy; the archive is not: the model can `search_offloaded` it for a
        detail the summary dropped. Returns the reference, or `None` when archiving is off or
        the store fails (the compaction goes ahead either way). Without `thread_id`, the run's
        thread is resolved as the read/search tools resolve it.
        """
        if not self.enabled or not self.archive_compacted or not messages:
            return None
        from foldwise.compaction._prompt_transcript import render_transcript

        text = render_transcript(messages)
        if not text.strip():
            return None
        thread = thread_id or resolve_thread_id()
        try:
            ref = yield from self.store.put_steps(thread, text, source="compaction", kind="archive")
        except Exception as exc:  # the summary still lands; only the archive is missing
            logger.error(
                "offload: archiving compacted messages failed in thread %s: %s", thread, exc
            )
            return None
        return ref.to_dict()

    def archive_messages(
        self, messages: Sequence[BaseMessage], thread_id: str | None
    ) -> dict[str, Any] | None:
        """Blocking form of `archive_steps`."""
        return run_sync(self.archive_steps(messages, thread_id))
