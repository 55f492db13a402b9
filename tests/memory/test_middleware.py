"""`MemoryMiddleware` in a real agent: remembered in one thread, injected as data in another."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from foldwise import FoldwiseConfig, create_agent
from foldwise.agent import find_memory
from foldwise.durable import DATA_OPEN
from foldwise.memory import MemoryManager, MemoryWorker, namespace_for, open_backend
from foldwise.middleware.memory import run_slice
from foldwise.testing import ScriptedChatModel
from tests.support.async_only_store import AsyncOnlyStore
from tests.support.memory import settle


def _agent(
    model: ScriptedChatModel, manager: MemoryManager, mode: str = "middleware", worker: bool = True
) -> Any:
    config = FoldwiseConfig.model_validate({"memory": {"enabled": True, "mode": mode}})
    return create_agent(
        config, model=model, checkpointer=InMemorySaver(), memory=manager, memory_worker=worker
    )


def _config(thread: str, user: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def _data_block(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if DATA_OPEN in str(m.content))


def test_a_fact_from_thread_a_is_injected_as_data_in_thread_b_for_that_user_only() -> None:
    manager = MemoryManager(open_backend("memory://"))
    manager.setup()
    model = ScriptedChatModel(default="ok")
    agent = _agent(model, manager)
    agent.invoke(
        {"messages": [("user", "Hi, I live in Berlin. 我喜欢喝茶。")]}, _config("a", "alice")
    )
    settle(agent)  # the run only enqueued; the worker applies it in the background
    agent.invoke({"messages": [("user", "Where should I eat tonight?")]}, _config("b", "alice"))
    block = _data_block(model.requests[-1].messages)
    assert "Berlin" in block and "茶" in block
    for message in model.requests[-1].messages:
        if isinstance(message, SystemMessage):
            assert "Berlin" not in str(message.content)  # never in a system message
    agent.invoke({"messages": [("user", "Where should I eat tonight?")]}, _config("c", "bob"))
    settle(agent)
    assert "Berlin" not in _data_block(model.requests[-1].messages)


def test_tool_mode_writes_to_the_runs_namespace_whatever_the_arguments() -> None:
    manager = MemoryManager(open_backend("memory://"))
    manager.setup()
    call = {
        "id": "c1",
        "name": "memory_add",
        "args": {"content": "The user prefers metric units", "namespace": ["users", "bob"]},
    }
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), "noted"], default="ok")
    agent = _agent(model, manager, mode="tool")
    result = agent.invoke({"messages": [("user", "use metric please")]}, _config("t", "alice"))
    answer = json.loads(str(result["messages"][2].content))
    assert answer["stored"]["text"] == "The user prefers metric units"
    assert [f.text for f in manager.list(namespace_for("alice"))] == [
        "The user prefers metric units"
    ]
    assert manager.list(namespace_for("bob")) == []


def test_the_async_agent_path_uses_only_the_async_store() -> None:
    store = AsyncOnlyStore()
    manager = MemoryManager(open_backend("memory://", store=store))
    model = ScriptedChatModel(default="ok")
    agent = _agent(model, manager, worker=False)  # an async app runs the worker in its loop
    memory = find_memory(agent)
    assert memory is not None and memory.pipeline is not None
    worker = MemoryWorker(manager, memory.pipeline.outbox)

    async def scenario() -> None:
        await manager.asetup()
        await agent.ainvoke({"messages": [("user", "My name is Alice.")]}, _config("a", "alice"))
        assert await worker.aflush(timeout=10) == 1
        await agent.ainvoke({"messages": [("user", "What is my name?")]}, _config("b", "alice"))

    asyncio.run(scenario(), debug=True)
    assert store.sync_calls == []
    assert "Alice" in _data_block(model.requests[-1].messages)


def test_run_slice_starts_at_the_runs_first_user_input() -> None:
    from langchain_core.messages import HumanMessage

    history = [
        HumanMessage("one", id="h1"),
        AIMessage("a", id="a1"),
        HumanMessage("two", id="h2"),
        HumanMessage("three", id="h3"),
        AIMessage("b", id="a2"),
    ]
    assert [m.id for m in run_slice(history)] == ["h2", "h3", "a2"]
    assert run_slice([AIMessage("x")]) == []


def test_a_committed_compaction_flushes_its_span_even_in_tool_mode(tmp_path: Any) -> None:
    """The span a compaction removes is queued under its receipt and applied once committed
    (foldwise keeps user messages verbatim, so here the span is the assistant's answers)."""
    config = FoldwiseConfig.model_validate(
        {
            "memory": {"enabled": True, "mode": "tool", "debounce_seconds": 0},
            "storage": {"url": f"sqlite:///{tmp_path / 'fw.db'}"},
            "summarization": {
                "model_name": "extractive",
                "min_gain_tokens": 0,
                "trigger": {"type": "messages", "value": 5},
                "keep": {"type": "messages", "value": 2},
            },
        }
    )
    model = ScriptedChatModel(default="ok " * 30)
    agent = create_agent(config, model=model, checkpointer=InMemorySaver())
    memory = find_memory(agent)
    assert memory is not None and memory.pipeline is not None
    for text in ["I live in Lisbon.", "What is the weather like?", "Thanks!"]:
        agent.invoke({"messages": [("user", text)]}, _config("t", "alice"))
    receipts = agent.get_state(_config("t", "alice")).values.get("compactions")
    assert receipts
    # Queued; the worker (debounce 0) may already have applied them.
    queued = memory.pipeline.outbox.status().counts
    assert queued.get("pending", 0) + queued.get("done", 0) == len(receipts), queued
    settle(agent)
    counts = memory.pipeline.outbox.status().counts
    assert counts.get("done") == len(receipts) and not counts.get("pending")


def test_unread_span_reads_after_the_marker_or_everything() -> None:
    from langchain_core.messages import HumanMessage

    from foldwise.middleware.memory import unread_span

    history = [HumanMessage("one", id="h1"), AIMessage("a", id="a1"), HumanMessage("two", id="h2")]
    assert [m.id for m in unread_span(history, "a1")] == ["h2"]
    assert [m.id for m in unread_span(history, None)] == ["h1", "a1", "h2"]
    assert [m.id for m in unread_span(history, "compacted-away")] == ["h1", "a1", "h2"]
    assert unread_span(history, "h2") == []
