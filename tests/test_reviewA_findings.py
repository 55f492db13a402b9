"""Review A of issue 16 (background pre-summarization, OpenTelemetry): confirmed findings.

1. The span fingerprint left out parts of a message the summarizer reads: an AI message's
   `invalid_tool_calls` (rendered as `AI tool call:` lines) and the `hide_from_ui` flag (a
   hidden message is not rendered at all). A message changed only there, same id and content,
   kept the fingerprint, and the background summary of the old message was committed.
2. Deleting a thread left its background summary running (the deleted thread's messages still
   going to the summarizer) and kept its entry, summary included, in the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise._steps import run_async
from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, scripted_factory, user
from tests.test_gateway_presummary import SETTINGS, brain, presummary_tasks
from tests.test_presummary import GatedSummarizer, _compactor, _history, _policy, _start

# -- 1. the fingerprint covers everything the summarizer reads ---------------------------------


def _with_invalid_call(messages: list[BaseMessage]) -> list[BaseMessage]:
    old = messages[3]
    bad = {"name": "drop_table", "args": "{oops", "id": "x1", "error": None}
    edited = AIMessage(id=old.id, content=old.content, invalid_tool_calls=[bad])
    return [*messages[:3], edited, *messages[4:]]


def _hidden(messages: list[BaseMessage]) -> list[BaseMessage]:
    old = messages[3]
    edited = AIMessage(id=old.id, content=old.content, additional_kwargs={"hide_from_ui": True})
    return [*messages[:3], edited, *messages[4:]]


@pytest.mark.parametrize("change", [_with_invalid_call, _hidden], ids=["invalid_call", "hidden"])
async def test_a_change_only_the_summarizer_sees_is_a_miss(
    change: Callable[[list[BaseMessage]], list[BaseMessage]],
) -> None:
    summarizer = GatedSummarizer()
    compactor = _compactor(summarizer, _policy())
    messages = _history(8)
    await _start(compactor, messages)
    changed = change(messages)
    assert [m.id for m in changed] == [m.id for m in messages]
    outcome = await run_async(compactor.compact_steps(changed, None, thread_id="t", force=True))
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert outcome.summary_text == "SUMMARY-2"  # made now, from the changed span
    assert summarizer.prompts[1] != summarizer.prompts[0]


async def test_an_unchanged_span_still_hits_after_a_checkpoint_trip() -> None:
    # The fingerprint must not miss on what a checkpoint round trip changes (ids, order and
    # content survive; the objects do not).
    summarizer = GatedSummarizer()
    compactor = _compactor(summarizer, _policy())
    messages = _history(8)
    await _start(compactor, messages)
    copied = [m.model_copy(deep=True) for m in messages]
    outcome = await run_async(compactor.compact_steps(copied, None, thread_id="t", force=True))
    assert outcome.receipt is not None and outcome.receipt.precomputed
    assert len(summarizer.prompts) == 1


def test_hidden_and_invalid_calls_are_what_the_summarizer_reads() -> None:
    # The premise of finding 1: both changes alter the summarizer's transcript.
    from foldwise.compaction._prompt_transcript import render_transcript

    plain = AIMessage(id="a", content="answer")
    assert render_transcript(_hidden([HumanMessage("h")] * 3 + [plain])[3:]) == ""
    assert "AI tool call: drop_table" in render_transcript(
        _with_invalid_call([HumanMessage("h")] * 3 + [plain])[3:]
    )


# -- 2. deleting a thread cancels and forgets its background summary ---------------------------


async def test_deleting_a_thread_cancels_its_background_summary(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(default=brain(gate))
    config = gateway_config(tmp_path, SETTINGS)
    try:
        async with open_app(config, scripted_factory(model)) as (c, app):
            assert (await c.post("/threads", json={"thread_id": "t"})).status_code == 200
            body = {"assistant_id": "agent"}
            for i in range(4):
                r = await c.post("/threads/t/runs/wait", json={**body, "input": user(f"q {i}")})
                assert r.status_code == 200, r.text
                if presummary_tasks():
                    break
            await gate.wait_entered()  # the background summary is in flight
            (task,) = presummary_tasks()
            assert (await c.delete("/threads/t")).status_code == 204
            await asyncio.wait({task}, timeout=5)
            assert task.cancelled()
            middleware = app.state.gateway.agents.get("agent").summarization
            assert middleware.compactor.presummaries.get("t") is None
    finally:
        gate.release()
