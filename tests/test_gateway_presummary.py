"""Background pre-summarization through the gateway: receipts, markers, and shutdown."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import BaseMessage

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import (
    Gate,
    gateway_config,
    is_summarizer_call,
    scripted_factory,
    user,
)

SETTINGS: dict[str, Any] = {
    "models": [{"name": "main", "use": "foldwise.testing:ScriptedChatModel"}],
    "summarization": {
        "trigger": {"type": "messages", "value": 10},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "none"},
        "presummarize_at": 0.5,
    },
}


def brain(gate: Gate | None = None) -> Any:
    summaries = itertools.count(1)

    def respond(messages: list[BaseMessage]) -> Any:
        if is_summarizer_call(messages):
            if gate is not None:
                gate.block()
            return f"SUMMARY #{next(summaries)}"
        return "answer"

    return respond


def presummary_tasks() -> list[asyncio.Task[Any]]:
    return [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("foldwise-presummary") and not t.done()
    ]


async def _turn(c: httpx.AsyncClient, text: str) -> None:
    r = await c.post("/threads/t/runs/wait", json={"assistant_id": "agent", "input": user(text)})
    assert r.status_code == 200, r.text


async def test_gateway_commits_a_precomputed_summary_and_marks_it(tmp_path: Path) -> None:
    model = ScriptedChatModel(default=brain())
    config = gateway_config(tmp_path, SETTINGS)
    async with open_app(config, scripted_factory(model)) as (c, _app):
        assert (await c.post("/threads", json={"thread_id": "t"})).status_code == 200
        receipts: list[dict[str, Any]] = []
        for i in range(8):
            await _turn(c, f"question {i}")
            for _ in range(100):  # let a background summary finish between turns
                if not presummary_tasks():
                    break
                await asyncio.sleep(0.02)
            receipts = (await c.get("/threads/t/compactions")).json()
            if receipts:
                break
        assert receipts and receipts[-1]["precomputed"] is True
        entries = (await c.get("/threads/t/transcript")).json()
        items = entries["entries"] if isinstance(entries, dict) else entries
        markers = [e["message"] for e in items if e["kind"] == "compaction"]
        assert markers and markers[-1]["precomputed"] is True
        state = (await c.get("/threads/t/state")).json()
        assert state["values"]["summary_text"] == "SUMMARY #1"
        summarizer_calls = [r for r in model.requests if is_summarizer_call(r.messages)]
        assert len(summarizer_calls) == 1


async def test_gateway_shutdown_leaves_no_background_summary_pending(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(default=brain(gate))
    config = gateway_config(tmp_path, SETTINGS)
    try:
        async with open_app(config, scripted_factory(model)) as (c, _app):
            assert (await c.post("/threads", json={"thread_id": "t"})).status_code == 200
            for i in range(4):
                await _turn(c, f"question {i}")
                if presummary_tasks():
                    break
            await gate.wait_entered()
            assert presummary_tasks()
        assert presummary_tasks() == []
    finally:
        gate.release()
