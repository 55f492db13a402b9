"""`LocalChatModel`: the base of foldwise's in-process chat models (no provider, no network).

The extractive summarizer, the scripted and replay models and the test doubles all answer a
message list with one message computed in-process. LangChain's `_generate` hook (and its
`_llm_type` name) is written here once; a subclass names itself and writes `_answer`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["DelayedChatModel", "LocalChatModel", "one_generation"]


def one_generation(message: BaseMessage) -> ChatResult:
    """The chat result that holds `message` as its only generation."""
    return ChatResult(generations=[ChatGeneration(message=message)])


class LocalChatModel(BaseChatModel):
    """A chat model that answers in-process; subclasses set `llm_type` and write `_answer`."""

    llm_type: ClassVar[str] = "foldwise-local"
    """LangChain's name for the model type (its `_llm_type`)."""

    @property
    def _llm_type(self) -> str:
        return self.llm_type

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        """The reply to `messages`; `options` are the call's keyword options (`tools`, ...)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return one_generation(self._answer(messages, kwargs))


class DelayedChatModel(LocalChatModel):
    """A local model that takes `delay_seconds` per call, then answers `_reply(messages)`.

    Blocking calls sleep in their thread; async calls sleep on the loop, so a caller's timeout
    can cancel them and no worker thread is left behind.
    """

    delay_seconds: float = 1.0

    def _reply(self, messages: list[BaseMessage]) -> BaseMessage:
        """The answer once the delay has passed."""
        raise NotImplementedError

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        time.sleep(self.delay_seconds)
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(self.delay_seconds)
        return one_generation(self._reply(messages))
