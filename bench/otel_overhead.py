"""What OpenTelemetry costs a `runs.wait`: CPU milliseconds per request, four ways.

Run by hand: `PYTHONPATH=. python bench/otel_overhead.py [requests] [rounds]`.

Each mode runs in its own process (the global providers can be set once), in-process over
ASGI (no sockets) with a scripted model, on SQLite: create a thread, then `runs.wait` on it.
The figure is process CPU time (all threads: aiosqlite's included) per request, after a
warm-up; rounds interleave the modes and the median is reported.

- `off`: foldwise's instrumentation disabled (`foldwise._telemetry.AVAILABLE = False`); what
  a gateway costs without it. FastAPI imports the OpenTelemetry API itself, so the API is
  never absent from a gateway.
- `api`: the API installed, no SDK (the default): every span is a no-op.
- `sdk-foldwise`: the SDK records foldwise's spans and metrics only (`use_providers`), with an
  in-memory exporter (`SimpleSpanProcessor`) and an in-memory metric reader.
- `sdk-global`: the same SDK set as the global providers, so FastAPI's own HTTP and
  operation spans and metrics are recorded too (what `foldwise serve` with `OTEL_*` does).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("off", "api", "sdk-foldwise", "sdk-global")
WARMUP = 20


def _setup(mode: str) -> object:
    from foldwise import _telemetry

    if mode == "off":
        _telemetry.AVAILABLE = False
        return None
    if mode == "api":
        return None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    if mode == "sdk-global":
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
    else:
        _telemetry.use_providers(tracer_provider, meter_provider)
    return exporter


async def _measure(mode: str, requests: int) -> dict[str, float]:
    from tests.support.gateway import gateway_config, open_gateway, scripted_factory, user

    from foldwise.testing import ScriptedChatModel

    exporter = _setup(mode)
    quiet = {"summarization": {"trigger": {"type": "messages", "value": 100000}}}
    model = ScriptedChatModel(default=lambda messages: "ok")
    with tempfile.TemporaryDirectory() as tmp:
        config = gateway_config(Path(tmp), quiet)
        async with open_gateway(config, scripted_factory(model)) as (client, _):

            async def one() -> None:
                thread = (await client.post("/threads", json={})).json()["thread_id"]
                body = {"assistant_id": "agent", "input": user("hello")}
                r = await client.post(f"/threads/{thread}/runs/wait", json=body)
                assert r.status_code == 200, r.text

            for _ in range(WARMUP):
                await one()
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(requests):
                await one()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    spans = len(exporter.get_finished_spans()) if exporter is not None else 0  # type: ignore[attr-defined]
    return {
        "cpu_ms": cpu / requests * 1000,
        "wall_ms": wall / requests * 1000,
        "spans_per_request": spans / (requests + WARMUP),
    }


async def _micro(mode: str, iterations: int) -> dict[str, float]:
    """CPU per request of foldwise's instrumentation calls alone, as one `runs.wait` makes them.

    A run span around a stand-in for the run that, like the agent, makes one model call
    (the tracer's two callbacks when it is attached), one lease wait, and, per request, one
    compaction-free run: no offload or compaction spans.
    """
    from types import SimpleNamespace
    from uuid import uuid4

    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from foldwise._telemetry import timed
    from foldwise.gateway._telemetry import traced_run

    _setup(mode)
    answer = AIMessage(
        "ok", usage_metadata={"input_tokens": 9, "output_tokens": 1, "total_tokens": 10}
    )
    result = LLMResult(generations=[[ChatGeneration(message=answer)]])
    spec = SimpleNamespace(
        assistant_id="agent", thread_id="t", model_name=None, stream_modes=(), messages=[1]
    )
    meta = {"ls_model_name": "stub", "ls_provider": "openai"}

    async def execute(run: object, config: dict) -> None:
        for handler in config.get("callbacks") or ():
            call = uuid4()
            handler.on_chat_model_start({}, [[]], run_id=call, tags=[], metadata=meta)
            handler.on_llm_end(result, run_id=call)
        run.status = "success"  # type: ignore[attr-defined]

    async def one() -> None:
        with timed("foldwise.lease.wait", {"foldwise.lease.kind": "run"}):
            pass
        run = SimpleNamespace(run_id="r", spec=spec, status="running", error=None)
        await traced_run(run, {}, execute)  # type: ignore[arg-type]

    for _ in range(1000):
        await one()
    cpu = time.process_time()
    for _ in range(iterations):
        await one()
    return {"cpu_us": (time.process_time() - cpu) / iterations * 1e6}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, requests = sys.argv[2], int(sys.argv[3])
        print(json.dumps(asyncio.run(_measure(mode, requests))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--micro":
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, __file__, "--micro-child", mode],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": os.getcwd()},
            )
            print(mode, out.stdout.strip())
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--micro-child":
        print(json.dumps(asyncio.run(_micro(sys.argv[2], 20000))))
        return
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    results: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    for _ in range(rounds):
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, str(requests)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": os.getcwd()},
            )
            results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = statistics.median(r["cpu_ms"] for r in results["off"])
    print(f"load average: {os.getloadavg()}  requests per run: {requests}  rounds: {rounds}")
    print("| mode | CPU ms / request (median) | vs off | wall ms / request | spans / request |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        cpu = statistics.median(r["cpu_ms"] for r in results[mode])
        wall = statistics.median(r["wall_ms"] for r in results[mode])
        spans = statistics.median(r["spans_per_request"] for r in results[mode])
        print(f"| {mode} | {cpu:.2f} | {cpu / base:.3f} | {wall:.2f} | {spans:.1f} |")


if __name__ == "__main__":
    main()
