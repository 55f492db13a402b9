"""Manual compaction of a thread: one write, precise no-ops, failures change nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.config import parse_config
from foldwise.errors import (
    CompactionDisabledError,
    ConfigError,
    SummaryGenerationError,
    ThreadNotFoundError,
)
from foldwise.testing import FailingChatModel, ScriptedChatModel

THREAD = {"configurable": {"thread_id": "m1"}}


def build(**summarization: Any) -> Any:
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 1000},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                **summarization,
            }
        }
    )
    agent = foldwise.create_agent(
        config, model=ScriptedChatModel(default="an answer " * 30), checkpointer=InMemorySaver()
    )
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"request {i}")]}, THREAD)
    return agent


def checkpoint_id(agent: Any) -> str:
    return str(agent.get_state(THREAD).config["configurable"]["checkpoint_id"])


def test_compaction_writes_one_checkpoint_and_keeps_other_channels() -> None:
    agent = build()
    agent.update_state(
        THREAD,
        {
            "delegations": [
                {
                    "id": "t1",
                    "status": "completed",
                    "created_at": "T",
                    "description": "d",
                    "subagent_type": "s",
                }
            ]
        },
    )
    before = checkpoint_id(agent)
    receipt = foldwise.compact_thread(agent, THREAD)
    assert receipt is not None and receipt.manual and receipt.trigger == "manual"
    snapshot = agent.get_state(THREAD)
    assert snapshot.next == ()
    assert checkpoint_id(agent) != before
    values = snapshot.values
    assert values["summary_text"]
    assert values["delegations"][0]["id"] == "t1"
    assert values["compactions"][-1]["id"] == receipt.id
    history = list(agent.get_state_history(THREAD))
    assert history[1].config["configurable"]["checkpoint_id"] == before  # exactly one new write


def test_nothing_to_compact_writes_nothing_and_says_why() -> None:
    agent = build()
    before = checkpoint_id(agent)
    outcome = foldwise.compact_thread_outcome(agent, THREAD, keep={"type": "messages", "value": 50})
    assert not outcome.compacted
    assert outcome.skip_reason == "not_enough_messages"
    assert checkpoint_id(agent) == before
    below = foldwise.compact_thread_outcome(agent, THREAD, force=False)
    assert below.skip_reason == "below_threshold"


def test_failure_raises_and_leaves_the_thread_unchanged() -> None:
    agent = build(fallback=None)
    middleware = foldwise.agent.find_summarization(agent)
    assert middleware is not None
    middleware.compactor.resolve = lambda name: FailingChatModel()
    before = checkpoint_id(agent)
    messages = [m.id for m in agent.get_state(THREAD).values["messages"]]
    with pytest.raises(SummaryGenerationError) as err:
        foldwise.compact_thread(agent, THREAD)
    assert err.value.attempts and "model unavailable" in err.value.attempts[0][1]
    assert checkpoint_id(agent) == before
    assert [m.id for m in agent.get_state(THREAD).values["messages"]] == messages


def test_keep_override_is_validated() -> None:
    agent = build()
    with pytest.raises(ConfigError, match=r"write 0\.8 for 80%"):
        foldwise.compact_thread(agent, THREAD, keep={"type": "fraction", "value": 80})


def test_disabled_and_unknown_threads() -> None:
    config = parse_config({"summarization": {"enabled": False}})
    agent = foldwise.create_agent(
        config, model=ScriptedChatModel(default="x"), checkpointer=InMemorySaver()
    )
    with pytest.raises(CompactionDisabledError):
        foldwise.compact_thread(agent, THREAD)
    enabled = build()
    with pytest.raises(ThreadNotFoundError):
        foldwise.compact_thread(enabled, {"configurable": {"thread_id": "nope"}})


def test_async_twin() -> None:
    agent = build()
    receipt = asyncio.run(
        foldwise.acompact_thread(agent, THREAD, keep={"type": "messages", "value": 1})
    )
    assert receipt is not None
    assert receipt.messages_preserved >= 1
