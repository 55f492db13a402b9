"""Provider usage is trusted only for the prefix it measured (issue 10, item 2), end to end."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.config import parse_config
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import USAGE_STAMP_KEY, get_counter

THREAD = {"configurable": {"thread_id": "stamps"}}


def _agent() -> tuple[object, ScriptedChatModel]:
    model = ScriptedChatModel(default="All four reconciliations are done. " * 3, usage=True)
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "tokens", "value": 10**6},
                "min_gain_tokens": 0,
            }
        }
    )
    return foldwise.create_agent(config, model=model, checkpointer=InMemorySaver()), model


def test_answers_carry_a_stamp_and_a_fresh_counter_anchors_only_on_the_same_prefix() -> None:
    agent, _ = _agent()
    for i in range(3):
        agent.invoke({"messages": [HumanMessage(f"reconcile ledger {i} " * 40)]}, THREAD)
    messages = agent.get_state(THREAD).values["messages"]  # type: ignore[attr-defined]
    answers = [m for m in messages if isinstance(m, AIMessage)]
    assert answers and all(USAGE_STAMP_KEY in m.response_metadata for m in answers)

    fresh = get_counter()  # another worker, or this one after a restart
    assert fresh.count_request(messages).anchored

    foldwise.compact_thread(agent, THREAD, keep={"type": "messages", "value": 2})
    kept = agent.get_state(THREAD).values["messages"]  # type: ignore[attr-defined]
    assert isinstance(kept[-1], AIMessage) and USAGE_STAMP_KEY in kept[-1].response_metadata
    after = get_counter().count_request(kept)
    # The kept answer's usage measured the request before compaction: never trusted now.
    assert not after.anchored
    assert after.total == get_counter().count_messages(kept, anchor=False)
