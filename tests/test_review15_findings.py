"""Review of issue 15's product fixes: the findings confirmed, each with its reproduction.

1. A run with `durability: "exit"` saves no checkpoint before it ends, so a compaction receipt
   it streamed waited `COMMIT_WAIT_SECONDS` (10 s) for one at every later step (20 s for a
   one-turn run on the scripted model), then was left out of the transcript until the next run.
2. A run cancelled while one of two parallel tools still ran lost the other tool's finished
   result: the repair's state update started from the head checkpoint, which does not hold
   the pending write of the finished tool. The state kept that tool call unanswered (a run
   without new input sent it to the provider so) and the real result never reached the
   transcript.
3. `runs/wait` of a queued run that another worker executed (`--workers 2`) answered with the
   thread's current values, which already held the runs queued after it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise.gateway._capture import COMMIT_WAIT_SECONDS
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import (
    gateway_config,
    is_summarizer_call,
    open_gateway,
    scripted_factory,
    user,
)

COMPACT_OFTEN = {
    "summarization": {
        "trigger": {"type": "messages", "value": 4},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "none"},
    }
}
QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


def _brain(messages: list[BaseMessage]) -> str:
    return "SUMMARY: so far." if is_summarizer_call(messages) else "an answer"


def _labels(entries: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] if e["kind"] == "compaction" else e["message"]["type"] for e in entries]


async def _compacting_thread(tmp_path: Path, durability: str) -> tuple[list[float], list[str]]:
    """Four runs on one thread (two of them compact); their times and the transcript."""
    config = gateway_config(tmp_path / durability, COMPACT_OFTEN)
    async with open_gateway(config, scripted_factory(ScriptedChatModel(default=_brain))) as (
        c,
        _,
    ):
        await c.post("/threads", json={"thread_id": "t"})
        took = []
        for i in range(4):
            body = {"assistant_id": "agent", "input": user(f"q{i} " * 30), "durability": durability}
            started = time.perf_counter()
            answer = await c.post("/threads/t/runs/wait", json=body)
            took.append(time.perf_counter() - started)
            assert answer.status_code == 200, answer.text
            in_state = [r["id"] for r in answer.json().get("compactions") or []]
            recorded = [r["id"] for r in (await c.get("/threads/t/compactions")).json()]
            assert recorded == in_state, f"run {i} ({durability}): receipts not recorded"
        page = await c.get("/threads/t/transcript", params={"limit": 100})
        return took, _labels(page.json()["entries"])


async def test_an_exit_durability_run_records_its_receipts_when_it_ends(tmp_path: Path) -> None:
    took, labels = await _compacting_thread(tmp_path, "exit")
    assert labels.count("compaction") == 2
    assert max(took) < COMMIT_WAIT_SECONDS / 2  # was 2 x COMMIT_WAIT_SECONDS per compacting run
    # The markers stand where they stand with the default durability.
    assert labels == (await _compacting_thread(tmp_path, "async"))[1]
