"""Compaction flushes: performed before the compaction commits, under its receipt id; a
failing flush fails the compaction and changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise._steps import Io
from foldwise.compaction import SummarizationEvent
from foldwise.testing import ScriptedChatModel

CONFIG = foldwise.FoldwiseConfig.model_validate(
    {
        "summarization": {
            "model_name": "extractive",
            "min_gain_tokens": 0,
            "trigger": {"type": "messages", "value": 5},
            "keep": {"type": "messages", "value": 2},
        }
    }
)
THREAD = {"configurable": {"thread_id": "t"}}


def _agent(flush: Any) -> Any:
    agent = foldwise.create_agent(
        CONFIG, model=ScriptedChatModel(default="done " * 40), checkpointer=InMemorySaver()
    )
    summarization = foldwise.agent.find_summarization(agent)
    assert summarization is not None
    summarization.compactor.flushes = [flush]
    return agent


def test_the_flush_sees_the_span_under_the_receipt_id_it_commits_with() -> None:
    seen: list[tuple[int, str]] = []

    def record(event: SummarizationEvent, receipt_id: str) -> None:
        seen.append((len(event.messages_to_summarize), receipt_id))

    agent = _agent(lambda event, rid: Io.call(record, event, rid))
    for step in ["one", "two", "three"]:
        agent.invoke({"messages": [("user", step)]}, THREAD)
    receipts = agent.get_state(THREAD).values["compactions"]
    assert seen and [rid for _, rid in seen] == [r["id"] for r in receipts]
    assert all(count > 0 for count, _ in seen)


def test_a_failing_flush_fails_the_compaction_and_changes_nothing() -> None:
    def boom(event: SummarizationEvent, receipt_id: str) -> None:
        raise OSError("outbox unavailable")

    agent = _agent(lambda event, rid: Io.call(boom, event, rid))
    for step in ["one", "two", "three"]:
        agent.invoke({"messages": [("user", step)]}, THREAD)
    values = agent.get_state(THREAD).values
    assert not values.get("compactions") and not values.get("summary_text")
    assert len(values["messages"]) == 6  # nothing removed


def test_the_async_path_awaits_the_flush_off_the_loop() -> None:
    calls: list[str] = []

    def sync_only(event: SummarizationEvent, receipt_id: str) -> None:
        raise AssertionError("the async path called the blocking form")

    async def async_form(event: SummarizationEvent, receipt_id: str) -> None:
        calls.append(receipt_id)

    agent = _agent(lambda event, rid: Io.of(sync_only, async_form, event, rid))

    async def run() -> None:
        for step in ["one", "two", "three"]:
            await agent.ainvoke({"messages": [("user", step)]}, THREAD)

    asyncio.run(run(), debug=True)
    assert calls and calls == [r["id"] for r in agent.get_state(THREAD).values["compactions"]]
