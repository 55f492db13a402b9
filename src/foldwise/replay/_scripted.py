"""`ScriptedChatModel`: a chat model that answers from a script and records every request.

Replay plays recorded sessions back through it (`ReplayChatModel` extends it) and the
benchmarks script their agents with it; `foldwise.testing` re-exports it for tests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

from foldwise._local_model import LocalChatModel

__all__ = ["SCRIPTED_PROVIDER", "RecordedRequest", "ScriptedChatModel", "stamp_answer"]

SCRIPTED_PROVIDER = "foldwise-scripted"
"""`response_metadata.model_provider` of scripted and replayed answers."""


def stamp_answer(message: AIMessage, model_name: str, input_tokens: int | None) -> None:
    """Set the provider metadata, and usage when `input_tokens` is given (output: chars / 4)."""
    if input_tokens is not None:
        output = math.ceil(len(str(message.content)) / 4)
        message.usage_metadata = {
            "input_tokens": input_tokens,
            "output_tokens": output,
            "total_tokens": input_tokens + output,
        }
    message.response_metadata = {
        **message.response_metadata,
        "model_provider": SCRIPTED_PROVIDER,
        "model_name": model_name,
    }


class RecordedRequest:
    """One request a scripted model received: the messages, bound tools and call options."""

    __slots__ = ("messages", "options", "tools")

    def __init__(self, messages: list[BaseMessage], tools: list[Any], options: dict[str, Any]):
        self.messages = messages
        self.tools = tools
        self.options = options

    def __repr__(self) -> str:
        return f"RecordedRequest(messages={len(self.messages)}, tools={len(self.tools)})"


class ScriptedChatModel(LocalChatModel):
    """A chat model that answers from a script and records every request.

    Each call takes the next entry of `responses`: a string (an `AIMessage` with that content),
    a message, an exception to raise, or a callable receiving the request messages. When the
    script runs out, `default` answers (or an `IndexError` is raised when it is `None`).

    Args:
        responses: The script.
        default: Answer used once the script is exhausted; `None` raises instead.
        usage: When true, every `AIMessage` carries `usage_metadata` whose `input_tokens` is
            computed by `input_token_counter` (default: characters / 4).
        input_token_counter: Counts the request for `usage_metadata`.
        context_window: When set, a request whose input tokens exceed it raises
            `ContextOverflowError`-like `ValueError` with "context_length_exceeded",
            as providers do.

    Example:
        >>> model = ScriptedChatModel(responses=["hello"])
        >>> model.invoke("hi").content
        'hello'
    """

    llm_type: ClassVar[str] = "foldwise-scripted"
    model_config = ConfigDict(arbitrary_types_allowed=True)

    responses: list[Any] = Field(default_factory=list)
    default: Any = None
    usage: bool = False
    input_token_counter: Callable[[list[BaseMessage]], int] | None = None
    context_window: int | None = None
    model_name: str = "scripted"

    _index: int = PrivateAttr(default=0)
    _requests: list[RecordedRequest] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        return self._requests

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Accept any tools; they are recorded with each request."""
        return self.bind(tools=list(tools), **kwargs)

    def _count_input(self, messages: list[BaseMessage]) -> int:
        if self.input_token_counter is not None:
            return int(self.input_token_counter(messages))
        return sum(math.ceil(len(str(m.content)) / 4) + 3 for m in messages)

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> BaseMessage:
        with self._lock:
            self._requests.append(
                RecordedRequest(list(messages), list(kwargs.get("tools") or []), dict(kwargs))
            )
            if self._index < len(self.responses):
                item = self.responses[self._index]
                self._index += 1
            elif self.default is not None:
                item = self.default
            else:
                raise IndexError(
                    f"ScriptedChatModel script exhausted after {len(self.responses)} responses"
                )
        input_tokens = self._count_input(messages)
        if self.context_window is not None and input_tokens > self.context_window:
            raise ValueError(
                f"context_length_exceeded: {input_tokens} input tokens exceed the "
                f"{self.context_window}-token window"
            )
        if callable(item) and not isinstance(item, BaseMessage):
            item = item(list(messages))
        if isinstance(item, BaseException):
            raise item
        message = item if isinstance(item, BaseMessage) else AIMessage(content=str(item))
        if isinstance(message, AIMessage):
            message = message.model_copy(deep=True)
            usage = self.usage and message.usage_metadata is None
            stamp_answer(message, self.model_name, input_tokens if usage else None)
        return message
