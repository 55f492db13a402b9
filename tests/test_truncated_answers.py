"""A model answer cut off mid-stream fails the run instead of becoming a final message.

langchain-openai ends a stream that stopped early (no `finish_reason`, no `[DONE]`) as if it
were whole, and parses a half-sent tool call's arguments as they are; foldwise's model call
refuses such an answer (`ModelResponseError`, HTTP 502 in the gateway), so the state keeps only
what came before and the half-sent tool call never runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.config import parse_config
from foldwise.errors import ModelResponseError
from foldwise.gateway import status_for
from foldwise.middleware._request_fit import check_complete
from tests.support import OpenAIStub

THREAD = {"configurable": {"thread_id": "t-cut"}}
ran: list[str] = []


@tool
def lookup(query: str) -> str:
    """Look a term up."""
    ran.append(query)
    return f"found {query}"


def _agent(stub: OpenAIStub, tmp_path: Any) -> Any:
    model = ChatOpenAI(base_url=stub.url + "/v1", api_key="k", model="stub", max_retries=0)
    config = parse_config({"offload": {"root": str(tmp_path)}})
    return foldwise.create_agent(config, model=model, tools=[lookup], checkpointer=InMemorySaver())


def _stream(agent: Any, text: str) -> None:
    for _ in agent.stream({"messages": [HumanMessage(text)]}, THREAD, stream_mode="messages"):
        pass


@pytest.mark.parametrize(
    "cut",
    [
        {"content": "an answer that stops in the middle of a sentence", "drop_after_chunks": 3},
        {
            "tool_calls": [{"name": "lookup", "arguments": {"query": "a long query string"}}],
            "drop_after_chunks": 4,
        },
    ],
    ids=["text", "tool-call"],
)
def test_a_stream_cut_mid_way_fails_the_run_and_keeps_nothing_of_it(
    tmp_path: Any, cut: dict[str, Any]
) -> None:
    ran.clear()
    with OpenAIStub([cut, "a whole answer"]) as stub:
        agent = _agent(stub, tmp_path)
        with pytest.raises(ModelResponseError, match="cut off before it finished"):
            _stream(agent, "first")
        assert stub.dropped == 1
        messages = agent.get_state(THREAD).values["messages"]
        assert [type(m) for m in messages] == [HumanMessage]
        assert ran == []  # the half-sent tool call never ran
        _stream(agent, "again")  # the thread goes on
        assert agent.get_state(THREAD).values["messages"][-1].content == "a whole answer"


def test_whole_answers_and_other_providers_pass() -> None:
    check_complete(
        AIMessage("x", response_metadata={"model_provider": "openai", "finish_reason": "stop"}), "t"
    )
    check_complete(
        AIMessage("x", response_metadata={"model_provider": "openai", "status": "completed"}), "t"
    )
    check_complete(AIMessage("x", response_metadata={"model_provider": "anthropic"}), "t")
    check_complete(AIMessage("x"), "t")
    with pytest.raises(ModelResponseError, match="thread t2"):
        check_complete(AIMessage("x", response_metadata={"model_provider": "openai"}), "t2")
    assert status_for(ModelResponseError("cut")) == 502
