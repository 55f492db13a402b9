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
4. New input after a run failed in a tools step (or a crash cut one) answered every call of that
   step "interrupted", also those whose tool had finished (GET /state showed their results).
5. The cut-off check covered the run's model answers only: a summarizer's answer cut mid-stream
   became the thread's summary (16 characters of it, the older messages removed).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.bench._serve import open_app
from foldwise.config import parse_config
from foldwise.gateway._capture import COMMIT_WAIT_SECONDS
from foldwise.messages import analyze_tool_pairing
from foldwise.testing import ScriptedChatModel
from tests.support import OpenAIStub
from tests.support.gateway import (
    gateway_config,
    is_summarizer_call,
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
    async with open_app(config, scripted_factory(ScriptedChatModel(default=_brain))) as (
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


def _two_tools(first: tuple[str, str], second: tuple[str, str]) -> tuple[ScriptedChatModel, Any]:
    """A model that calls two tools (name, call id) in one step, then answers."""
    calls = [
        {"name": name, "args": {"query": query}, "id": call_id}
        for (name, call_id), query in ((first, "x"), (second, "y"))
    ]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls)], default="final answer")
    tools = {t.name: t for t in (fast_tool, slow_tool, side_effect_tool, broken_tool)}
    return model, scripted_factory(model, tools=[tools[first[0]], tools[second[0]]])


_released = threading.Event()
_slow_entered = threading.Event()


@tool
def fast_tool(query: str) -> str:
    """Answer at once."""
    return f"FAST RESULT {query}"


@tool
def slow_tool(query: str) -> str:
    """Answer once the test releases it."""
    _slow_entered.set()
    _released.wait(20)
    return "SLOW RESULT"


async def test_a_cancel_keeps_the_result_of_a_parallel_tool_that_finished(tmp_path: Path) -> None:
    _released.clear()
    _slow_entered.clear()
    model, factory = _two_tools(("fast_tool", "c_fast"), ("slow_tool", "c_slow"))
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (c, _):
        await c.post("/threads", json={"thread_id": "t"})
        run = await c.post("/threads/t/runs", json={"assistant_id": "agent", "input": user("go")})
        run_id = run.json()["run_id"]
        assert await asyncio.to_thread(_slow_entered.wait, 20)
        await asyncio.sleep(0.3)  # the fast tool has finished: its write waits on the step
        try:
            cancelled = await c.post(f"/threads/t/runs/{run_id}/cancel", params={"wait": "true"})
            assert cancelled.status_code in (200, 202, 204), cancelled.text
        finally:
            _released.set()
        state = (await c.get("/threads/t/state")).json()["values"]["messages"]
        results = {m["tool_call_id"]: m["content"] for m in state if m["type"] == "tool"}
        assert results.get("c_fast") == "FAST RESULT x"
        assert "c_slow" in results  # closed with an error result
        page = await c.get("/threads/t/transcript", params={"limit": 100})
        recorded = [e["message"].get("content") for e in page.json()["entries"]]
        assert "FAST RESULT x" in recorded
        # A run without new input continues from there: the provider gets every call answered.
        go_on = await c.post("/threads/t/runs/wait", json={"assistant_id": "agent", "input": None})
        assert go_on.status_code == 200, go_on.text
        assert analyze_tool_pairing(model.requests[-1].messages).pending_calls == ()


async def test_wait_of_a_run_another_worker_ran_answers_with_its_own_values(
    tmp_path: Path, storage_url: str
) -> None:
    def brain(messages: list[BaseMessage]) -> str:
        time.sleep(0.05)
        return f"re: {messages[-1].content}"

    config = gateway_config(tmp_path, {**QUIET, "storage": {"url": storage_url}})
    model = ScriptedChatModel(default=brain)
    async with (
        open_app(config, scripted_factory(model)) as (a, first),
        open_app(config, scripted_factory(model)),
    ):
        await first.state.gateway.queue.stop()  # this worker accepts, the other one runs
        await a.post("/threads", json={"thread_id": "t"})
        texts = [f"message {n}" for n in range(6)]

        async def wait(text: str) -> Any:
            body = {"assistant_id": "agent", "input": user(text), "multitask_strategy": "enqueue"}
            answer = await a.post("/threads/t/runs/wait", json=body)
            assert answer.status_code == 200, answer.text
            return answer.json()["messages"][-1]["content"]

        last = await asyncio.gather(*(wait(text) for text in texts))
        assert last == [f"re: {text}" for text in texts]


_ran: list[str] = []


@tool
def side_effect_tool(query: str) -> str:
    """Do something once and say so."""
    _ran.append(query)
    return f"DONE {query}"


@tool
def broken_tool(query: str) -> str:
    """Fail after the other tool of the step has finished."""
    time.sleep(0.3)
    raise RuntimeError("tool crashed")


async def test_new_input_keeps_the_result_of_a_tool_that_finished_in_a_failed_step(
    tmp_path: Path,
) -> None:
    _ran.clear()
    model, factory = _two_tools(("side_effect_tool", "c_done"), ("broken_tool", "c_broken"))
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (c, _):
        await c.post("/threads", json={"thread_id": "t"})
        failed = await c.post(
            "/threads/t/runs/wait", json={"assistant_id": "agent", "input": user("go")}
        )
        assert failed.status_code == 500 and "tool crashed" in failed.text
        shown = (await c.get("/threads/t/state")).json()["values"]["messages"]
        assert [m["content"] for m in shown if m["type"] == "tool"] == ["DONE x"]
        step = (await c.get("/threads/t/state")).json()["next"]
        # Refused input changes nothing (the step is ended only for a run that starts).
        stray = {"messages": [{"role": "tool", "content": "?", "tool_call_id": "c_none"}]}
        refused = await c.post(
            "/threads/t/runs/wait", json={"assistant_id": "agent", "input": stray}
        )
        assert refused.status_code == 422, refused.text
        assert (await c.get("/threads/t/state")).json()["next"] == step != []
        again = {"assistant_id": "agent", "input": user("again")}
        answer = await c.post("/threads/t/runs/wait", json=again)
        assert answer.status_code == 200, answer.text
        sent = model.requests[-1].messages
        results = {m.tool_call_id: m.content for m in sent if isinstance(m, ToolMessage)}
        # The tool that ran keeps its result (was: "interrupted", inviting a second call).
        assert results["c_done"] == "DONE x" and set(results) == {"c_done", "c_broken"}
        assert sent[-1].content == "again" and _ran == ["x"]
        page = await c.get("/threads/t/transcript", params={"limit": 100})
        assert "DONE x" in [e["message"].get("content") for e in page.json()["entries"]]


def test_a_summary_cut_off_mid_stream_is_not_kept(tmp_path: Path) -> None:
    """The summarizer's answer went unchecked: a dropped stream became the thread's summary."""
    summary = "## Summary\nThe user asked about folding paper, and the assistant answered. " * 3
    script = ["one " * 20, "two " * 20, {"content": summary, "drop_after_chunks": 3}, "three"]
    settings = {**COMPACT_OFTEN["summarization"], "fallback": "extractive"}
    config = parse_config({"offload": {"root": str(tmp_path)}, "summarization": settings})
    thread = {"configurable": {"thread_id": "t"}}
    with OpenAIStub([*script, *["more"] * 5]) as stub:
        model = ChatOpenAI(base_url=stub.url + "/v1", api_key="k", model="stub", max_retries=0)
        agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
        for i in range(3):
            message = HumanMessage(f"question {i} " * 20)
            for _ in agent.stream({"messages": [message]}, thread, stream_mode="messages"):
                pass
        assert stub.dropped == 1
    values = agent.get_state(thread).values
    receipts = values.get("compactions") or []
    assert receipts and receipts[0]["model_used"] == "extractive"  # the next candidate
    assert not summary.startswith(values["summary_text"])  # was "## Summary\nThe u"
