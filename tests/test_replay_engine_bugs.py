"""Engine bugs found by replay, kept as regression tests now that the engine is fixed."""

from __future__ import annotations

from itertools import pairwise

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from foldwise.config import parse_config
from foldwise.replay import Trace, replay_trace
from foldwise.tokens import exact_backend
from tests.test_replay_live import config, session

pytestmark = pytest.mark.skipif(exact_backend() is None, reason="needs the exact tokenizers")


def test_receipt_tokens_after_matches_the_next_request() -> None:
    report = replay_trace(Trace.from_messages(session()), config=config())
    calls = report.calls
    checked = 0
    for call in calls:
        for event in call.compactions:
            assert event.tokens_after is not None
            # The next request is measured with the same (configured) counter.
            assert abs(event.tokens_after - call.tokens) <= 0.25 * call.tokens
            checked += 1
    assert checked


def _offload_session(turns: int = 5) -> list[BaseMessage]:
    prose = "The keeper relit the lamp after the storm and wrote the date in the log. " * 420
    messages: list[BaseMessage] = [SystemMessage("You are a research agent.")]
    for t in range(turns):
        messages += [
            HumanMessage(f"Search round {t}."),
            AIMessage("", tool_calls=[{"name": "search", "args": {"q": f"r{t}"}, "id": f"c{t}"}]),
            ToolMessage(f"round {t}: " + prose, tool_call_id=f"c{t}", name="search"),
            AIMessage(f"Round {t} noted."),
        ]
    return messages


def _prefix_breaks(offload: bool) -> list[int]:
    cfg = parse_config(
        {
            "models": [{"name": "run", "context_window": 128000}],
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "tokens", "value": 100000},
            },
            "offload": {"enabled": offload},
        }
    )
    report = replay_trace(Trace.from_messages(_offload_session()), config=cfg)
    assert report.compaction_count == 0
    assert report.offloaded_count == (5 if offload else 0)
    calls = report.calls
    return [c.index for p, c in pairwise(calls) if c.cached_tokens < p.measured]


def test_requests_grow_by_appending_without_offload() -> None:
    assert _prefix_breaks(offload=False) == []


def test_an_offload_keeps_the_previous_request_as_a_cacheable_prefix() -> None:
    assert _prefix_breaks(offload=True) == []
