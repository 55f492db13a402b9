"""`LocalChatModel`: the base of foldwise's in-process chat models (no provider, no network).

The extractive summarizer, the scripted and replay models and the test doubles all answer a
message list with one message computed in-process. LangChain's `_generate` hook (and its
`_llm_type` name) is written here once; a subclass names itself and writes `_answer`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["LocalChatModel", "one_generation"]


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
