"""Hung summarizers: timed-out provider calls never starve the offline fallback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from foldwise.compaction import build_summary_prompt
from foldwise.compaction._summarize import agenerate_summary, generate_summary
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.summarizers import ExtractiveSummarizer
from tests._factories import LenCounter, ai, human

COUNTER = LenCounter()
TIMEOUT = 0.05
CALLS = 10


class HungChatModel(BaseChatModel):
    """Blocks until released (at most a second): a provider that stopped answering."""

    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    @property
    def _llm_type(self) -> str:
        return "hung"

    def release(self) -> None:
        self._release.set()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._release.wait(1.0)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])


class AsyncHungChatModel(HungChatModel):
    """The same, with a native async implementation that sleeps on the loop."""

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        for _ in range(100):
            if self._release.is_set():
                break
            await asyncio.sleep(0.01)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])


@pytest.fixture
def hung() -> Iterator[HungChatModel]:
    model = HungChatModel()
    yield model
    model.release()


@pytest.fixture
def async_hung() -> Iterator[AsyncHungChatModel]:
    model = AsyncHungChatModel()
    yield model
    model.release()


def _prompt() -> str:
    messages = [human(f"step {i}: edit /src/app_{i}.py and keep the API stable") for i in range(6)]
    messages += [ai(f"done with step {i}; tests pass") for i in range(6)]
    prompt = build_summary_prompt(messages, None, trim_tokens=None, counter=COUNTER)
    assert prompt is not None
    return prompt


def _resolver(model: BaseChatModel) -> Callable[[str], BaseChatModel]:
    def resolve(name: str) -> BaseChatModel:
        return ExtractiveSummarizer() if name == BUILTIN_EXTRACTIVE else model

    return resolve


def test_hung_provider_calls_never_disable_the_fallback(hung: HungChatModel) -> None:
    prompt = _prompt()
    for _ in range(CALLS):
        result = generate_summary(
            prompt,
            ["hung", BUILTIN_EXTRACTIVE],
            _resolver(hung),
            input_tokens=10**6,
            count=COUNTER.count_text,
            timeout=TIMEOUT,
        )
        assert result.model_name == BUILTIN_EXTRACTIVE
        assert [a.ok for a in result.attempts] == [False, True]
        assert "timed out" in (result.attempts[0].error or "")


@pytest.mark.parametrize("kind", ["sync-only", "native-async"])
async def test_async_path_survives_hung_calls(
    kind: str, hung: HungChatModel, async_hung: AsyncHungChatModel
) -> None:
    model = hung if kind == "sync-only" else async_hung
    prompt = _prompt()
    for _ in range(CALLS):
        result = await agenerate_summary(
            prompt,
            ["hung", BUILTIN_EXTRACTIVE],
            _resolver(model),
            input_tokens=10**6,
            count=COUNTER.count_text,
            timeout=TIMEOUT,
        )
        assert result.model_name == BUILTIN_EXTRACTIVE
        assert "timed out" in (result.attempts[0].error or "")


def test_the_thread_cap_fails_fast_and_the_fallback_still_runs(
    hung: HungChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import foldwise.compaction._summarize as summarize

    monkeypatch.setattr(summarize, "_slots", threading.BoundedSemaphore(1))
    prompt = _prompt()
    names = ["hung", BUILTIN_EXTRACTIVE]
    first = generate_summary(
        prompt, names, _resolver(hung), input_tokens=10**6, count=len, timeout=TIMEOUT
    )
    second = generate_summary(
        prompt, names, _resolver(hung), input_tokens=10**6, count=len, timeout=TIMEOUT
    )
    assert "timed out" in (first.attempts[0].error or "")
    assert "still running past their timeout" in (second.attempts[0].error or "")
    assert first.model_name == second.model_name == BUILTIN_EXTRACTIVE
