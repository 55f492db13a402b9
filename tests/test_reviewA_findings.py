"""Review A of issue 16 (background pre-summarization, OpenTelemetry): confirmed findings.

1. The span fingerprint left out parts of a message the summarizer reads: an AI message's
   `invalid_tool_calls` (rendered as `AI tool call:` lines) and the `hide_from_ui` flag (a
   hidden message is not rendered at all). A message changed only there, same id and content,
   kept the fingerprint, and the background summary of the old message was committed.
2. Deleting a thread left its background summary running (the deleted thread's messages still
   going to the summarizer) and kept its entry, summary included, in the process.
3. A model call cancelled with its run (or by a summarizer timeout) never ended its `chat`
   span: LangChain reports no error to callbacks when `agenerate` itself is cancelled, so the
   span was never exported.
4. `configure_from_env` took an application's explicit `NoOpTracerProvider` (tracing turned
   off on purpose) for "not configured": it installed a meter provider beside it, returned
   True, and OpenTelemetry warned about an override it refused.
5. Every histogram is in seconds, but none gave bucket boundaries: the SDK's defaults
   (0, 5, 10, 25, ... meant for milliseconds) put every run, lease wait and compaction under
   5 s into one bucket, so no percentile could be read from an exporter.

And a gap: no test read `foldwise.compaction.precomputed` as true from a span or metric.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise import _telemetry
from foldwise._steps import run_async
from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, scripted_factory, user
from tests.test_gateway_presummary import SETTINGS, brain, presummary_tasks
from tests.test_presummary import GatedSummarizer, _compactor, _history, _policy, _start
from tests.test_telemetry import Telemetry, _attrs


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """foldwise's spans and metrics, read back from local in-memory providers."""
    telemetry = Telemetry()
    _telemetry.use_providers(telemetry.tracer_provider, telemetry.meter_provider)
    try:
        yield telemetry
    finally:
        _telemetry.use_providers()
        telemetry.tracer_provider.shutdown()
        telemetry.meter_provider.shutdown()


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


# -- 3. a cancelled model call still ends its span ---------------------------------------------


async def test_a_cancelled_runs_model_call_span_is_ended(tmp_path: Path, otel: Telemetry) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("first")])
    config = gateway_config(tmp_path, {"summarization": {"enabled": False}})
    try:
        async with open_app(config, scripted_factory(model)) as (c, _):
            await c.post("/threads", json={"thread_id": "c"})
            r = await c.post("/threads/c/runs", json={"assistant_id": "agent", "input": user("x")})
            run_id = r.json()["run_id"]
            await gate.wait_entered()
            cancel = await c.post(f"/threads/c/runs/{run_id}/cancel", params={"wait": "true"})
            assert cancel.status_code == 200, cancel.text
    finally:
        gate.release()
    (run,) = otel.finished("invoke_agent agent")
    assert _attrs(run)["foldwise.run.status"] == "interrupted"
    (chat,) = otel.finished("chat scripted")
    assert chat.parent is not None and chat.parent.span_id == run.context.span_id
    assert _attrs(chat)["error.type"] == "CancelledError"
    assert chat.status.status_code.name == "ERROR"
    assert chat.end_time is not None and run.end_time is not None
    assert chat.end_time <= run.end_time


async def test_a_precomputed_compaction_is_marked_in_its_span_and_metrics(
    tmp_path: Path, otel: Telemetry
) -> None:
    model = ScriptedChatModel(default=brain())
    async with open_app(gateway_config(tmp_path, SETTINGS), scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "t"})
        receipts: list[dict[str, object]] = []
        for i in range(8):
            body = {"assistant_id": "agent", "input": user(f"question {i}")}
            assert (await c.post("/threads/t/runs/wait", json=body)).status_code == 200
            tasks = presummary_tasks()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            receipts = (await c.get("/threads/t/compactions")).json()
            if receipts:
                break
    assert receipts and receipts[-1]["precomputed"] is True
    (span,) = otel.finished("foldwise.compaction")
    assert _attrs(span)["foldwise.compaction.precomputed"] is True
    assert _attrs(span)["foldwise.compaction.id"] == receipts[-1]["id"]
    counted = otel.metrics()["foldwise.compactions"]
    assert [(a["foldwise.compaction.precomputed"], n) for a, n in counted] == [(True, 1)]


# -- 4. an application's own no-op tracer provider is left alone -------------------------------

NOOP_APP = """
import json
from opentelemetry import metrics, trace
trace.set_tracer_provider(trace.NoOpTracerProvider())  # the application: tracing off
from foldwise.gateway._telemetry import configure_from_env
print(json.dumps({
    "configured": configure_from_env(),
    "tracer": type(trace.get_tracer_provider()).__name__,
    "meter": type(metrics.get_meter_provider()).__name__,
}))
"""


def test_configure_from_env_leaves_an_applications_no_op_provider_alone() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env = {**clean, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}
    out = subprocess.run(
        [sys.executable, "-c", NOOP_APP],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "configured": False,
        "tracer": "NoOpTracerProvider",
        "meter": "_ProxyMeterProvider",
    }
    assert "Overriding" not in out.stderr


# -- 5. the seconds histograms have sub-second buckets ------------------------------------------


def test_seconds_histograms_tell_milliseconds_apart(otel: Telemetry) -> None:
    names = [m.name for m in _telemetry._METRICS.values() if m.kind == "histogram"]
    assert names and all(_telemetry._METRICS[n].unit == "s" for n in names)
    for name in names:
        for seconds in (0.003, 0.012, 0.15, 2.0, 30.0):
            _telemetry.record(name, seconds, {})
    data = otel.reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: metric.data.data_points[0]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    for name in names:
        counts = list(points[name].bucket_counts)  # type: ignore[attr-defined]
        assert sum(counts) == 5
        assert max(counts) == 1, (name, list(points[name].explicit_bounds))  # type: ignore[attr-defined]
