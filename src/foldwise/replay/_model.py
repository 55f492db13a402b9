"""`ReplayChatModel`: the recorded assistant, played back like a provider with a context window."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import PrivateAttr

from foldwise.errors import ConfigError
from foldwise.messages import message_text
from foldwise.replay._scripted import (
    SCRIPTED_PROVIDER,
    RecordedRequest,
    ScriptedChatModel,
    stamp_answer,
)
from foldwise.summarizers import ExtractiveSummarizer
from foldwise.tokens import TokenCounter, get_counter

__all__ = [
    "PROVIDER_NAME",
    "ProviderAttempt",
    "ReplayChatModel",
    "default_provider_counter",
    "is_summarizer_prompt",
]

PROVIDER_NAME = SCRIPTED_PROVIDER
"""`response_metadata.model_provider` of the answers (as `ScriptedChatModel` reports it)."""
_SUMMARY_MARKERS = ("<new_messages>", "Messages to summarize:")


def is_summarizer_prompt(messages: Sequence[BaseMessage]) -> bool:
    """Whether a request is a summarizer prompt (foldwise's or LangChain's), not an agent turn."""
    last = messages[-1] if messages else None
    if not isinstance(last, HumanMessage):
        return False
    text = message_text(last)
    return any(marker in text for marker in _SUMMARY_MARKERS)


@dataclass(frozen=True)
class ProviderAttempt:
    """One request the fake provider received.

    Attributes:
        tokens: Input tokens as the provider counts them (messages and tool schemas).
        rejected: The request exceeded the window and was refused (a simulated HTTP 400).
        forced: It exceeded the window but was let through so the replay could continue.
        synthetic: The trace had no recorded answer here; an empty one was made up.
    """

    tokens: int
    rejected: bool
    forced: bool = False
    synthetic: bool = False


class ReplayChatModel(ScriptedChatModel):
    """Answers each agent call with the next recorded `AIMessage` of the current turn.

    It behaves like a provider: `usage_metadata.input_tokens` is the request's size as counted
    by `provider_counter` (an exact tokenizer when available) and a request above `window`
    tokens is refused with `ContextOverflowError`. Summarizer prompts never consume the script:
    they are answered by the deterministic `ExtractiveSummarizer`.

    Args:
        window: The provider's context window; `None` accepts everything.
        provider_counter: Counts requests as the provider would (default: exact `o200k_base`
            when the optional tokenizers are installed, else the estimate).
    """

    llm_type: ClassVar[str] = "foldwise-replay"
    window: int | None = None
    provider_counter: Any = None

    _queue: list[AIMessage] = PrivateAttr(default_factory=list)
    _attempts: list[ProviderAttempt] = PrivateAttr(default_factory=list)
    _force_next: bool = PrivateAttr(default=False)
    _summarizer: ExtractiveSummarizer = PrivateAttr(default_factory=ExtractiveSummarizer)

    @property
    def counter(self) -> TokenCounter:
        """The provider's token counter."""
        counter = self.provider_counter
        if isinstance(counter, TokenCounter):
            return counter
        return default_provider_counter()

    @property
    def attempts(self) -> list[ProviderAttempt]:
        """Every agent request received, accepted or not, in order."""
        return self._attempts

    @property
    def pending(self) -> int:
        """Recorded answers of the current turn not played yet."""
        return len(self._queue)

    def load_turn(self, answers: Sequence[AIMessage]) -> None:
        """Queue the recorded assistant messages of the next turn."""
        self._queue = list(answers)

    def force_next(self) -> None:
        """Let the next request through even if it exceeds the window (after a failure)."""
        self._force_next = True

    def provider_tokens(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
        """The request's input tokens as the provider counts them."""
        counter = self.counter
        return sum(counter.count_message(m) for m in messages) + counter.count_tools(tools)

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> BaseMessage:
        if is_summarizer_prompt(messages):
            return AIMessage(content=self._summarizer.summarize(messages))
        tools = list(kwargs.get("tools") or [])
        tokens = self.provider_tokens(messages, tools)
        over = self.window is not None and tokens > self.window
        with self._lock:
            self._requests.append(RecordedRequest(list(messages), tools, dict(kwargs)))
            if over and not self._force_next:
                self._attempts.append(ProviderAttempt(tokens, rejected=True))
                raise ContextOverflowError(
                    f"context_length_exceeded: {tokens} input tokens exceed the "
                    f"{self.window}-token window"
                )
            self._force_next = False
            synthetic = not self._queue
            answer = (
                self._queue.pop(0).model_copy(deep=True)
                if self._queue
                else AIMessage(content="", id=f"synthetic-{uuid.uuid4().hex[:12]}")
            )
            self._attempts.append(ProviderAttempt(tokens, False, forced=over, synthetic=synthetic))
        # Same usage and metadata as `ScriptedChatModel(usage=True)` reports, so a live agent
        # on a ScriptedChatModel counting like this provider makes identical decisions.
        stamp_answer(answer, self.model_name, tokens)
        return answer


def default_provider_counter() -> TokenCounter:
    """Exact `o200k_base` when the optional tokenizers are installed, else the estimate."""
    try:
        return get_counter("o200k_base")
    except ConfigError:  # the tokenizers extra is optional
        return get_counter("estimate")
