"""Instruments of a replay run: the request probe and the summarizer tap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.outputs import LLMResult

from foldwise.compaction import SUMMARIZE_TAGS
from foldwise.messages import message_text
from foldwise.tokens import TokenCounter

__all__ = ["ReplayProbe", "RequestSnapshot", "SummaryEvent", "SummaryTap"]


@dataclass
class RequestSnapshot:
    """One request exactly as it reached the model, and the agent state it was built from.

    Attributes:
        messages: The request's messages (the system prompt excluded).
        system: The request's system message.
        tools: The tools bound for this request.
        state: The agent state (values are LangGraph's immutable snapshots).
        error: The exception the model raised, if it did.
    """

    messages: list[BaseMessage]
    system: SystemMessage | None
    tools: list[Any]
    state: dict[str, Any]
    error: BaseException | None = None


class ReplayProbe(AgentMiddleware[Any, Any, Any]):
    """Innermost middleware: records every request as the model receives it; changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[RequestSnapshot] = []

    def _snapshot(self, request: ModelRequest[Any]) -> RequestSnapshot:
        state = request.state if isinstance(request.state, dict) else {}
        snapshot = RequestSnapshot(
            list(request.messages), request.system_message, list(request.tools), dict(state)
        )
        self.snapshots.append(snapshot)
        return snapshot

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Record the request, then send it unchanged."""
        snapshot = self._snapshot(request)
        try:
            return handler(request)
        except BaseException as err:
            snapshot.error = err
            raise

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        snapshot = self._snapshot(request)
        try:
            return await handler(request)
        except BaseException as err:
            snapshot.error = err
            raise


@dataclass(frozen=True)
class SummaryEvent:
    """One summarizer call.

    Attributes:
        before_attempt: Index of the next request the probe records (the call it precedes).
        input_messages: Messages handed to the summarizer (after the system's trimming).
        input_tokens: Tokens of the summarizer's input (the report's counter).
        output_tokens: Tokens of the summary.
        summary_chars: Characters of the summary.
    """

    before_attempt: int
    input_messages: int
    input_tokens: int
    output_tokens: int
    summary_chars: int


@dataclass
class SummaryTap(BaseCallbackHandler):
    """Records summarizer calls: foldwise's through callbacks, peers' through `wrap`."""

    probe: ReplayProbe
    counter: TokenCounter
    events: list[SummaryEvent] = field(default_factory=list)
    _open: dict[Any, tuple[int, int, int]] = field(default_factory=dict)

    def wrap(self, summarize: Callable[[list[BaseMessage]], str]) -> Callable[[Any], str]:
        """Wrap a peer's summarizer function `messages -> text` so its calls are recorded."""

        def tapped(messages: Any) -> str:
            items: Sequence[BaseMessage] = list(messages)
            text = summarize(list(items))
            self.events.append(
                SummaryEvent(
                    len(self.probe.snapshots),
                    len(items),
                    sum(self.counter.count_message(m) for m in items),
                    self.counter.count_text(text),
                    len(text),
                )
            )
            return text

        return tapped

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: Any,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the prompt of a foldwise summarizer call (tagged `foldwise:summarize`)."""
        if not tags or SUMMARIZE_TAGS[-1] not in tags:
            return
        prompt = [m for batch in messages for m in batch]
        tokens = sum(self.counter.count_message(m) for m in prompt)
        self._open[run_id] = (len(self.probe.snapshots), len(prompt), tokens)

    def on_llm_end(self, response: LLMResult, *, run_id: Any, **kwargs: Any) -> None:
        """Complete the event with the summary's size."""
        opened = self._open.pop(run_id, None)
        if opened is None:
            return
        text = ""
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                text += message_text(message) if message is not None else generation.text
        self.events.append(
            SummaryEvent(opened[0], opened[1], opened[2], self.counter.count_text(text), len(text))
        )
