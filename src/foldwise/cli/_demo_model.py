"""`DemoChatModel`: the scripted, streaming model that answers new messages in the demo.

`foldwise serve --demo` serves it as the `agent` assistant. It never calls a provider: each
answer is deterministic text that quotes the question and describes the request it received
(message count, input tokens, whether foldwise's durable block was in it), streamed in small
chunks so a `messages-tuple` stream shows tokens arriving. A question that opens with
"search", "look up" or "find" gets a `search_docs` tool call first; the tool returns a long
listing, large enough for foldwise to offload it, and the answer then points at the artifact.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool

from foldwise._local_model import LocalChatModel
from foldwise.messages import is_real_user_message, message_text
from foldwise.replay import default_provider_counter
from foldwise.replay._scripted import stamp_answer
from foldwise.tokens import TokenCounter

__all__ = ["DEMO_SYSTEM_PROMPT", "SEARCH_TOOL", "DemoChatModel", "demo_reply", "search_docs"]

DEMO_SYSTEM_PROMPT = (
    "You are the scripted demo model of `foldwise serve --demo`. You answer deterministically "
    "and offline; you can search the demo documents with `search_docs`."
)
"""The system prompt of the `agent` assistant in the demo."""
SEARCH_TOOL = "search_docs"
_SEARCH_REQUEST = re.compile(
    r"^\W*(?:please\s+|can you\s+|could you\s+)?(?:search|look up|find|grep)\b"
    r"|^\W*(?:请|帮我)?(?:搜索|查找|检索)",
    re.I,
)
"""A question that opens with a search verb gets a `search_docs` call (only the opening: an
offloaded paste's preview mentions `search_offloaded`)."""
_LISTING_LINES = 320
_DURABLE = "<durable_context_data"


@tool(SEARCH_TOOL)
def search_docs(query: str) -> str:
    """Search the demo document store; returns every matching line (a long listing)."""
    topic = " ".join(query.split())[:80] or "everything"
    lines = [f"search_docs results for {topic!r}: {_LISTING_LINES} matching lines"]
    for i in range(1, _LISTING_LINES + 1):
        book, section = divmod(i * 7919, 97)
        lines.append(
            f"doc-{book % 23:02d}.md:{section + 1:03d}: line {i} mentions {topic}; retention "
            f"window {30 + i % 60} days, owner team-{i % 9}, reviewed 2025-{1 + i % 12:02d}-"
            f"{1 + i % 28:02d}, status {'open' if i % 5 else 'closed'}."
        )
    return "\n".join(lines)


def _last_question(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if is_real_user_message(message):
            return " ".join(message_text(message).split())
    return ""


def _quote(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def demo_reply(
    messages: Sequence[BaseMessage], *, tool_names: Sequence[str] = (), input_tokens: int = 0
) -> AIMessage:
    """The scripted answer to a request (a `search_docs` call when the question asks for one)."""
    question = _last_question(messages)
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        preview = message_text(last).splitlines()
        return AIMessage(
            content=(
                f"The search returned {len(preview)} preview lines. When a tool output is "
                "larger than `offload.tool_token_limit`, foldwise stores the whole output as "
                "an artifact and leaves only a head-and-tail preview in my context: open the "
                "Artifacts tab to page through it or search it. First line: "
                f"{_quote(preview[0] if preview else '')}"
            )
        )
    if SEARCH_TOOL in tool_names and _SEARCH_REQUEST.search(question):
        call = {"name": SEARCH_TOOL, "args": {"query": _quote(question, 100)}, "id": _call_id()}
        return AIMessage(content="Let me search the documents.", tool_calls=[call])
    durable = any(_DURABLE in message_text(m) for m in messages)
    return AIMessage(
        content=(
            f"(scripted demo model) You asked: “{_quote(question)}”. I am a deterministic "
            f"stand-in for a real model, so this answer is made up, but the request behind it is "
            f"real: it held {len(messages)} messages and about {input_tokens:,} input tokens"
            + (", including foldwise's durable data block" if durable else "")
            + ". Type `/compact` to fold this conversation now, or ask me to search the docs to "
            "see a large tool output offloaded."
        )
    )


def _tool_name(bound: Any) -> str:
    if isinstance(bound, BaseTool):
        return bound.name
    if isinstance(bound, dict):
        function = bound.get("function")
        return str((function if isinstance(function, dict) else bound).get("name", ""))
    return ""


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


def _chunks(answer: AIMessage, size: int) -> Iterator[AIMessageChunk]:
    """`answer` as streamed chunks: words of its text, then its tool calls, usage on the last."""
    text = message_text(answer)
    words = re.findall(r"\S+\s*", text)
    pieces = ["".join(words[i : i + size]) for i in range(0, len(words), size)]
    for piece in pieces:
        yield AIMessageChunk(content=piece)
    for index, call in enumerate(answer.tool_calls):
        yield AIMessageChunk(
            content="",
            tool_call_chunks=[
                {
                    "name": call["name"],
                    "args": json.dumps(call["args"], ensure_ascii=False),
                    "id": call["id"],
                    "index": index,
                    "type": "tool_call_chunk",
                }
            ],
        )
    yield AIMessageChunk(
        content="",
        usage_metadata=answer.usage_metadata,
        response_metadata=dict(answer.response_metadata),
        chunk_position="last",
    )


class DemoChatModel(LocalChatModel):
    """Scripted answers (`demo_reply`) with usage stamped like a provider, streamed by words.

    Args:
        model_name: Reported in `response_metadata.model_name`.
        words_per_chunk: Words per streamed chunk.
        chunk_delay: Seconds between streamed chunks (async streaming only), so a client sees
            the answer arrive.
        provider_counter: Counts `usage_metadata.input_tokens` (default: as the replayed
            sessions' provider counts).
    """

    llm_type: ClassVar[str] = "foldwise-demo"
    model_name: str = "demo-chat"
    words_per_chunk: int = 3
    chunk_delay: float = 0.02
    provider_counter: Any = None

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Accept any tools; `search_docs` is called when a question asks for a search."""
        return self.bind(tools=list(tools), **kwargs)

    def _counter(self) -> TokenCounter:
        counter = self.provider_counter
        return counter if isinstance(counter, TokenCounter) else default_provider_counter()

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        tools = list(options.get("tools") or [])
        counter = self._counter()
        tokens = sum(counter.count_message(m) for m in messages) + counter.count_tools(tools)
        names = [_tool_name(t) for t in tools]
        answer = demo_reply(messages, tool_names=names, input_tokens=tokens)
        stamp_answer(answer, self.model_name, tokens)
        return answer

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        answer = self._answer(messages, kwargs)
        assert isinstance(answer, AIMessage)
        for chunk in _chunks(answer, self.words_per_chunk):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        answer = self._answer(messages, kwargs)
        assert isinstance(answer, AIMessage)
        for chunk in _chunks(answer, self.words_per_chunk):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield ChatGenerationChunk(message=chunk)
