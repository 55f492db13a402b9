"""OpenTelemetry: spans and metrics of real gateway runs, read back from the SDK's in-memory
exporter and metric reader (foldwise's tracer and meter are pointed at local providers, so the
global ones, and the other tests, are untouched)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from foldwise import _telemetry
from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import (
    Gate,
    gateway_config,
    is_summarizer_call,
    scripted_factory,
    user,
)

SECRET = "PASTE-SECRET-9931"
SUMMARY = "SUMMARY-SECRET-5127"


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.spans.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric name -> [(attributes, value or histogram count/sum)]."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)  # type: ignore[attr-defined]
                        found.setdefault(metric.name, []).append((dict(point.attributes), value))
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    _telemetry.use_providers(telemetry.tracer_provider, telemetry.meter_provider)
    try:
        yield telemetry
    finally:
        _telemetry.use_providers()
        telemetry.tracer_provider.shutdown()
        telemetry.meter_provider.shutdown()


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page text {SECRET} " * 2000


def brain(messages: list[BaseMessage]) -> AIMessage:
    if is_summarizer_call(messages):
        return AIMessage(SUMMARY)
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage("read it")
    if "fetch" in str(last.content):
        return AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": "u"}, "id": "f1"}])
    return AIMessage("an ordinary answer, long enough to be worth compacting. " * 40)


COMPACTING = {
    "summarization": {
        "trigger": {"type": "messages", "value": 6},
        "keep": {"type": "messages", "value": 1},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "latest"},
    },
    "offload": {"tool_token_limit": 800, "preview_chars": 200},
}


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_run_that_offloads_and_compacts_is_traced(tmp_path: Path, otel: Telemetry) -> None:
    asyncio.get_running_loop().set_debug(True)
    model = ScriptedChatModel(default=brain, usage=True)
    config = gateway_config(tmp_path, COMPACTING)
    async with open_app(config, scripted_factory(model, tools=[fetch])) as (c, _):
        await c.post("/threads", json={"thread_id": "t1"})
        run_ids = []
        for text in ("fetch it", "turn 1", "turn 2", "turn 3"):
            r = await c.post(
                "/threads/t1/runs/wait", json={"assistant_id": "agent", "input": user(text)}
            )
            assert r.status_code == 200, r.text
            run_ids.append(r.headers["content-location"].rsplit("/", 1)[1])
        automatic = (await c.get("/threads/t1/compactions")).json()
        manual = await c.post(
            "/threads/t1/compact", json={"keep": {"type": "messages", "value": 1}}
        )
        assert manual.status_code == 200 and manual.json()["compacted"], manual.text
        receipts = (await c.get("/threads/t1/compactions")).json()
    assert automatic, "the trigger should have compacted"
    assert len(receipts) == len(automatic) + 1

    runs = otel.finished("invoke_agent agent")
    assert [_attrs(s)["foldwise.run.id"] for s in runs] == run_ids
    for span in runs:
        attrs = _attrs(span)
        assert attrs["gen_ai.operation.name"] == "invoke_agent"
        assert attrs["gen_ai.conversation.id"] == "t1"
        assert attrs["foldwise.run.status"] == "success"
        assert attrs["foldwise.run.queued"] is False
    run_of = {s.context.span_id: s for s in runs}

    chats = otel.finished("chat scripted")
    assert chats and all(s.parent is not None and s.parent.span_id in run_of for s in chats)
    answers = [s for s in chats if not _attrs(s)["foldwise.summarizer"]]
    summaries = [s for s in chats if _attrs(s)["foldwise.summarizer"]]
    assert len(summaries) == len(automatic)  # the manual compaction runs outside any run
    assert all(_attrs(s)["gen_ai.usage.input_tokens"] > 0 for s in answers)
    assert {_attrs(s)["gen_ai.request.model"] for s in chats} == {"scripted"}

    (offload,) = otel.finished("foldwise.offload")[:1]
    attrs = _attrs(offload)
    assert attrs["foldwise.offload.kind"] == "tool"
    assert attrs["foldwise.offload.bytes"] == len(fetch.invoke({"url": "u"}).encode())
    assert attrs["foldwise.offload.artifact_id"].startswith("art_")
    assert offload.parent is not None and offload.parent.span_id == runs[0].context.span_id

    compactions = otel.finished("foldwise.compaction")
    assert [_attrs(s)["foldwise.compaction.id"] for s in compactions] == [r["id"] for r in receipts]
    receipt, span = receipts[0], compactions[0]
    attrs = _attrs(span)
    assert attrs["foldwise.compaction.trigger"] == receipt["trigger"] == "messages"
    assert attrs["foldwise.compaction.tokens_before"] == receipt["tokens_before"]
    assert attrs["foldwise.compaction.tokens_after"] == receipt["tokens_after"]
    assert attrs["foldwise.compaction.messages_removed"] == receipt["messages_removed"]
    assert attrs["foldwise.compaction.summarizer_model"] == receipt["model_used"]
    assert attrs["foldwise.compaction.precomputed"] is False
    assert attrs["foldwise.run.id"] == receipt["run_id"]
    assert span.parent is not None and run_of[span.parent.span_id]
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == pytest.approx(receipt["duration_ms"] * 1e6, rel=0.01)
    (manual_span,) = [s for s in compactions if _attrs(s)["foldwise.compaction.manual"]]
    assert _attrs(manual_span)["foldwise.compaction.trigger"] == "manual"
    assert _attrs(manual_span)["foldwise.compaction.id"] == receipts[-1]["id"]

    # Never user text, tool output or summaries in any attribute.
    for recorded in otel.finished():
        for value in _attrs(recorded).values():
            assert SECRET not in str(value) and SUMMARY not in str(value)
            assert "fetch it" not in str(value)

    metrics = otel.metrics()
    assert sum(v for _, v in metrics["foldwise.compactions"]) == len(receipts)
    saved = sum(max(0, r["tokens_before"] - r["tokens_after"]) for r in receipts)
    assert saved > 0
    assert sum(v for _, v in metrics["foldwise.compaction.tokens_saved"]) == saved
    by_kind = {a["foldwise.offload.kind"]: v for a, v in metrics["foldwise.offload.bytes"]}
    assert by_kind["tool"] == attrs_bytes(otel) and by_kind.get("archive", 0) > 0
    ((labels, (count, total)),) = metrics["foldwise.run.duration"]
    assert labels == {"foldwise.run.status": "success", "gen_ai.agent.name": "agent"}
    assert count == 4 and total > 0
    leases = metrics["foldwise.lease.wait"]
    assert sum(n for a, (n, _) in leases if a == {"foldwise.lease.kind": "run"}) == 4


def attrs_bytes(otel: Telemetry) -> int:
    return sum(
        _attrs(s)["foldwise.offload.bytes"]
        for s in otel.finished("foldwise.offload")
        if _attrs(s)["foldwise.offload.kind"] == "tool"
    )


async def test_busy_answers_queue_waits_and_gauges(tmp_path: Path, otel: Telemetry) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("first"), "second"])
    config = gateway_config(tmp_path, {"summarization": {"enabled": False}})
    async with open_app(config, scripted_factory(model), queue_poll_seconds=0.05) as (c, _):
        await c.post("/threads", json={"thread_id": "q"})
        body = {"assistant_id": "agent", "input": user("one")}
        first = asyncio.create_task(c.post("/threads/q/runs/wait", json=body))
        await gate.wait_entered()
        busy = await c.post("/threads/q/runs/wait", json={**body, "input": user("two")})
        assert busy.status_code == 409
        queued_body = {**body, "input": user("three"), "multitask_strategy": "enqueue"}
        queued = asyncio.create_task(c.post("/threads/q/runs/wait", json=queued_body))
        for _ in range(500):
            if otel.finished("foldwise.queue.enqueue"):
                break
            await asyncio.sleep(0.01)
        for _ in range(100):  # the dispatcher reads the queue's figures once a second
            if otel.metrics().get("foldwise.queue.depth") == [({}, 1)]:
                break
            await asyncio.sleep(0.05)
        assert otel.metrics()["foldwise.queue.depth"] == [({}, 1)]
        ((_, age),) = otel.metrics()["foldwise.queue.oldest_age"]
        assert age >= 0.1
        gate.release()
        assert (await first).status_code == 200
        assert (await queued).status_code == 200

    metrics = otel.metrics()
    busy_counts = metrics["foldwise.busy_responses"]
    assert busy_counts == [({"error.type": "BusyError"}, 1)]
    refused = [n for a, (n, _) in metrics["foldwise.lease.wait"] if a.get("error.type")]
    assert sum(refused) >= 1
    ((_, (count, waited)),) = metrics["foldwise.queue.wait"]
    assert count == 1 and waited >= 0.2
    (enqueue,) = otel.finished("foldwise.queue.enqueue")
    (dequeue,) = otel.finished("foldwise.queue.dequeue")
    run_id = _attrs(enqueue)["foldwise.run.id"]
    assert _attrs(dequeue)["foldwise.run.id"] == run_id
    assert _attrs(dequeue)["foldwise.queue.wait_ms"] >= 200
    (queued_run,) = [
        s for s in otel.finished("invoke_agent agent") if _attrs(s)["foldwise.run.id"] == run_id
    ]
    assert _attrs(queued_run)["foldwise.run.queued"] is True
    assert _attrs(queued_run)["foldwise.run.queued_ms"] >= 200


async def test_a_failed_run_span_is_an_error(tmp_path: Path, otel: Telemetry) -> None:
    def broken(messages: list[BaseMessage]) -> AIMessage:
        raise RuntimeError("the provider is down")

    model = ScriptedChatModel(default=broken)
    config = gateway_config(tmp_path, {"summarization": {"enabled": False}})
    async with open_app(config, scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "f"})
        r = await c.post("/threads/f/runs/wait", json={"assistant_id": "agent", "input": user("x")})
        assert r.status_code >= 500
    (run,) = otel.finished("invoke_agent agent")
    assert _attrs(run)["foldwise.run.status"] == "error"
    assert _attrs(run)["error.type"] == "RuntimeError"
    assert run.status.status_code.name == "ERROR"
    assert "provider is down" not in str(run.status.description)
    (chat,) = otel.finished("chat scripted")
    assert _attrs(chat)["error.type"] == "RuntimeError"


async def test_memory_extract_write_and_recall_are_traced(tmp_path: Path, otel: Telemetry) -> None:
    from langchain_core.messages import HumanMessage

    from foldwise._steps import run_async
    from foldwise.memory import MemoryManager, namespace_for
    from foldwise.memory._backends import open_backend
    from foldwise.memory._inject import memory_context_steps

    asyncio.get_running_loop().set_debug(True)
    manager = MemoryManager(open_backend(f"sqlite:///{tmp_path / 'memory.db'}"))
    await manager.asetup()
    namespace = namespace_for("alice", "agent")
    said = [HumanMessage("My name is Ada Quill and I live in Lisbon.", id="h1")]
    try:
        decisions = await manager.aremember(namespace, said)
        context = await run_async(
            memory_context_steps(
                manager,
                [namespace],
                "where do I live?",
                max_tokens=1500,
                recall_k=8,
                profile_share=0.6,
                count=len,
            )
        )
    finally:
        await manager.aclose()
    added = [d for d in decisions if d.action == "add"]
    assert added, decisions
    (extract,) = otel.finished("foldwise.memory.extract")
    assert _attrs(extract)["foldwise.memory.messages"] == 1
    assert _attrs(extract)["foldwise.memory.candidates"] >= len(added)
    (write,) = otel.finished("foldwise.memory.write")
    assert _attrs(write)["foldwise.memory.decisions"] == len(decisions)
    assert _attrs(write)["foldwise.memory.action.add"] == len(added)
    (recall,) = otel.finished("foldwise.memory.recall")
    assert _attrs(recall)["foldwise.memory.active"] == len(added)
    assert _attrs(recall)["foldwise.memory.recalled"] >= 1
    assert "Lisbon" in str(context)
    for span in (extract, write, recall):
        assert all("Lisbon" not in str(v) and "Ada" not in str(v) for v in _attrs(span).values())
