"""Defects found by the adversarial review of the engine work (issue 10), each reproduced."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.agent import find_summarization
from foldwise.compaction import CompactionReceipt
from foldwise.config import parse_config
from foldwise.durable import DurableChannel
from foldwise.middleware._request_fit import is_context_overflow, overflow_numbers
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import get_counter


class RateLimitError(Exception):
    pass


def test_observers_never_hear_of_an_overflow_compaction_that_was_not_committed() -> None:
    model = ScriptedChatModel(
        responses=[
            *[AIMessage(f"a{i} " + "reply text " * 150) for i in range(3)],
            ContextOverflowError("prompt is too long: 9000 tokens > 8000 maximum"),
            RateLimitError("429 rate limited"),
        ],
        default="ok",
    )
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "none"},
            },
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    seen: list[CompactionReceipt] = []
    middleware = find_summarization(agent)
    assert middleware is not None
    middleware.compactor.observers = [seen.append]
    thread = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        agent.invoke({"messages": [HumanMessage(f"q{i} " + "words " * 200)]}, thread)
    with pytest.raises(RateLimitError):
        agent.invoke({"messages": [HumanMessage("q3")]}, thread)
    assert seen == []
    assert not agent.get_state(thread).values.get("compactions")


def _fetching_agent(errors: list[BaseException], checkpointer: Any = None) -> tuple[Any, Any]:
    @tool
    def fetch() -> str:
        """Fetch the facts."""
        return " ".join(f"fact{k}" for k in range(700))

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "c1"}])

    model = ScriptedChatModel(responses=list(errors), default=brain)
    model.profile = {"max_input_tokens": 8000}
    agent = foldwise.create_agent(
        parse_config({"offload": {"enabled": False}}),
        model=model,
        tools=[fetch],
        checkpointer=checkpointer,
    )
    return agent, model


def test_a_guessed_overflow_scale_does_not_outlive_its_run_nor_leak_across_threadless_runs() -> (
    None
):
    refusal = ContextOverflowError("Your input exceeds the context window of this model.")
    agent, model = _fetching_agent([refusal])
    agent.invoke({"messages": [HumanMessage("conversation A")]})
    agent.invoke({"messages": [HumanMessage("unrelated conversation B")]})
    last = model.requests[-1].messages
    assert not any("characters clipped" in str(m.content) for m in last)


def test_the_fitter_agrees_with_the_planner_on_provider_usage() -> None:
    """A provider counting 0.6x the estimate: requests it measures well inside the window are
    not clipped because foldwise's own estimate would not fit."""
    estimate = get_counter()
    calls = {"n": 0}

    @tool
    def fetch(i: int) -> str:
        """Fetch one document."""
        return f"doc {i}: " + " ".join(f"fact{i}_{k}" for k in range(700))

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if calls["n"] < 8:
            calls["n"] += 1
            call = {"name": "fetch", "args": {"i": calls["n"]}, "id": f"c{calls['n']}"}
            return AIMessage("", tool_calls=[call])
        return AIMessage("done")

    def provider(messages: list[BaseMessage]) -> int:
        return int(0.6 * estimate.count_messages(messages, anchor=False))

    model = ScriptedChatModel(
        default=brain, usage=True, context_window=8000, input_token_counter=provider
    )
    model.profile = {"max_input_tokens": 8000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "reserved_output_tokens": 500,
                "keep": {"type": "tokens", "value": 3000},
            },
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(config, model=model, tools=[fetch], checkpointer=InMemorySaver())
    agent.invoke(
        {"messages": [HumanMessage("collect the docs")]}, {"configurable": {"thread_id": "t"}}
    )
    for request in model.requests:
        if provider(request.messages) < 7500 - 1000:
            assert not any("characters clipped" in str(m.content) for m in request.messages)


@pytest.mark.parametrize(
    ("text", "limit", "request_tokens"),
    [
        (
            "input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
            200000,
            197626,
        ),
        (
            "This model's maximum context length is 16385 tokens. However, you requested 17000 "
            "tokens (15000 in the messages, 2000 in the completion).",
            16385,
            15000,
        ),
        (
            "The input token count (1196265) exceeds the maximum number of tokens allowed "
            "(1048575).",
            1048575,
            1196265,
        ),
        (
            "This model's maximum context length is 32768 tokens. However, your request has "
            "30000 input tokens. Please reduce the length of the input messages.",
            32768,
            30000,
        ),
    ],
)
def test_provider_overflow_messages_of_other_providers_are_read(
    text: str, limit: int, request_tokens: int
) -> None:
    error = ValueError(text)
    assert is_context_overflow(error)
    assert overflow_numbers(error) == (limit, request_tokens)


def test_application_channels_are_rendered_from_the_messages_of_each_call() -> None:
    """A custom channel whose filter depends on messages appended within a run."""

    def gone(value: list[str], messages: Any) -> list[str]:
        text = " ".join(str(m.content) for m in messages)
        return [v for v in value if v not in text]

    pins = DurableChannel(
        "pins",
        render=lambda value: "## Pinned\n" + "\n".join(f"- {v}" for v in value),
        gone_from_context=gone,
        capture=lambda messages, state: None if state.get("pins") else ["budget-10k"],
    )

    @tool
    def policy() -> str:
        """Read the policy."""
        return "policy says: budget-10k"

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": "policy", "args": {}, "id": "c1"}])

    model = ScriptedChatModel(default=brain)
    agent = foldwise.create_agent(
        parse_config({"offload": {"enabled": False}}),
        model=model,
        tools=[policy],
        checkpointer=InMemorySaver(),
        durable_channels=[pins],
    )
    agent.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t"}})
    sent = [any('channel="pins"' in str(m.content) for m in r.messages) for r in model.requests]
    assert sent == [True, False]  # the tool result now shows the pin: no longer rendered
