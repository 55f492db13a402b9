"""Stream modes driven with `langgraph_sdk`: every LangGraph Server mode, subgraphs, no leaks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph_sdk.client import LangGraphClient

from foldwise.bench._serve import open_app
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.gateway._stream import StreamTranslator
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
ALL_MODES = [
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
    "events",
]


@asynccontextmanager
async def sdk_gateway(
    tmp_path: Path, factory: Any, config: dict[str, Any] | None = None
) -> AsyncIterator[LangGraphClient]:
    """The official SDK client talking to an in-process gateway."""
    async with open_app(gateway_config(tmp_path, config or QUIET), factory) as (_, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=30
        ) as http:
            yield LangGraphClient(http)


async def collect(client: LangGraphClient, thread: str, **options: Any) -> list[tuple[str, Any]]:
    parts = client.runs.stream(thread, "agent", **options)
    return [(part.event, part.data) async for part in parts]


def tool_agent() -> Any:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        get_stream_writer()({"progress": f"looking up {term}"})
        return f"definition of {term}"

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("it means X")
        return AIMessage("", tool_calls=[{"name": "lookup", "args": {"term": "fold"}, "id": "c1"}])

    return scripted_factory(ScriptedChatModel(default=brain), tools=[lookup])


async def test_every_stream_mode_streams(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, tool_agent()) as client:
        thread = (await client.threads.create())["thread_id"]
        events = await collect(client, thread, input=user("define fold"), stream_mode=ALL_MODES)
        names = {name for name, _ in events}
        assert events[0][0] == "metadata"
        expected = {
            "values",
            "updates",
            "messages",
            "messages/metadata",
            "messages/complete",
            "custom",
            "debug",
            "tasks",
            "checkpoints",
            "events",
        }
        assert expected <= names, expected - names
        assert {"progress": "looking up fold"} in [d for n, d in events if n == "custom"]
        tuples = [d for n, d in events if n == "messages"]
        assert [t[0]["type"] for t in tuples] == ["ai", "tool", "ai"]
        complete = [d[0]["content"] for n, d in events if n == "messages/complete"]
        assert complete[-1] == "it means X"
        kinds = {d["event"] for n, d in events if n == "events"}
        assert {"on_chain_start", "on_chain_end"} <= kinds
        checkpoints = [d for n, d in events if n == "checkpoints"]
        assert checkpoints[-1]["values"]["messages"][-1]["content"] == "it means X"
        # The run's lease rides in the LangGraph config: it never reaches a client.
        assert "__foldwise" not in json.dumps(events, default=str)
        # The final state is the same as without the extra modes.
        state = await client.threads.get_state(thread)
        assert state["values"]["messages"][-1]["content"] == "it means X"


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _subgraph_factory(request: AgentRequest) -> HostedAgent:
    def inner(state: _State) -> dict[str, Any]:
        return {"messages": [AIMessage("from the subgraph")]}

    child = StateGraph(_State)
    child.add_node("inner", inner)
    child.add_edge(START, "inner")
    child.add_edge("inner", END)
    parent = StateGraph(_State)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    return HostedAgent(parent.compile(checkpointer=request.checkpointer))


async def test_stream_subgraphs_names_the_namespace(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, _subgraph_factory) as client:
        thread = (await client.threads.create())["thread_id"]
        flat = await collect(client, thread, input=user("hi"), stream_mode="updates")
        assert all("|" not in name for name, _ in flat)
        nested = await collect(
            client, thread, input=user("again"), stream_mode="updates", stream_subgraphs=True
        )
        names = [name for name, _ in nested]
        assert any(name.startswith("updates|child:") for name in names), names
        assert "updates" in names


def _produced(name: str, data: Any) -> Any:
    """What a streamed event says a model produced (messages, or a model event's output)."""
    if name.startswith("messages"):
        return data
    if name == "events" and data["event"].startswith(("on_chat_model", "on_llm")):
        return [data["data"].get("output"), data["data"].get("chunk")]
    return None


async def test_summarizer_tokens_reach_no_stream_mode(tmp_path: Path) -> None:
    secret = "SUMMARY-SECRET-5521"

    def brain(messages: list[BaseMessage]) -> str:
        return secret if is_summarizer_call(messages) else "an ordinary answer"

    model = ScriptedChatModel(default=brain)
    config = {
        "summarization": {
            "trigger": {"type": "messages", "value": 4},
            "keep": {"type": "messages", "value": 1},
            "min_gain_tokens": 0,
            "preserve_human": {"mode": "latest"},
        }
    }
    async with sdk_gateway(tmp_path, scripted_factory(model), config) as client:
        thread = (await client.threads.create())["thread_id"]
        seen: list[tuple[str, Any]] = []
        for turn in range(4):
            seen += await collect(client, thread, input=user(f"turn {turn}"), stream_mode=ALL_MODES)
        assert any(is_summarizer_call(req.messages) for req in model.requests)
        # The summary is state (values, updates, the agent model's next input); the
        # summarizer's own model output, token by token or whole, is never streamed.
        leaks = [
            (name, data)
            for name, data in seen
            if secret in json.dumps(_produced(name, data), default=str)
        ]
        assert leaks == []
        chat_events = [d for n, d in seen if n == "events" and d["event"].startswith("on_chat")]
        assert chat_events, "the agent's own model calls are streamed"
        state = await client.threads.get_state(thread)
        assert state["values"]["summary_text"] == secret


def test_legacy_messages_mode_accumulates_partial_messages() -> None:
    sent: list[tuple[str, Any]] = []
    translator = StreamTranslator(["messages"], lambda event, data: sent.append((event, data)))
    meta = {"langgraph_node": "model", "tags": []}
    translator.feed((), "messages", (AIMessageChunk("Hel", id="m1"), meta))
    translator.feed((), "messages", (AIMessageChunk("lo", id="m1"), meta))
    translator.feed((), "messages", (AIMessageChunk("SECRET", id="s1"), {"tags": ["nostream"]}))
    translator.feed(("child:1",), "messages", (AIMessage("whole", id="m2"), meta))
    assert [event for event, _ in sent] == [
        "messages/metadata",
        "messages/partial",
        "messages/partial",
        "messages/metadata|child:1",
        "messages/complete|child:1",
    ]
    assert sent[0][1] == {"m1": {"metadata": meta}}
    assert [m.content for m in sent[2][1]] == ["Hello"]
    assert not isinstance(sent[2][1][0], AIMessageChunk)  # sent as a whole message
