"""OpenTelemetry set-up: foldwise without the API, `foldwise serve` exporting from `OTEL_*`,
an application's own providers left alone, and LangChain tracers working beside foldwise's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tracers.context import collect_runs

from foldwise import _telemetry
from foldwise.bench._serve import child_env, open_app, start_serve
from foldwise.testing import ScriptedChatModel
from tests.support import OpenAIStub
from tests.support.gateway import gateway_config, scripted_factory, user
from tests.test_serve_e2e import write_config

ROOT = Path(__file__).resolve().parents[1]

ABSENT = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.modules["opentelemetry"] = None  # `import opentelemetry...` raises ImportError

    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    import foldwise
    from foldwise import _telemetry
    from foldwise.config import parse_config
    from foldwise.testing import ScriptedChatModel

    @tool
    def fetch(url: str) -> str:
        "Fetch a page."
        return "page text " * 3000

    def brain(messages):
        if "<new_messages>" in str(messages[0].content):
            return AIMessage("the summary")
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("read it " * 100)
        if "fetch" in str(messages[-1].content):
            return AIMessage("", tool_calls=[{"name": "fetch", "args": {"url": "u"}, "id": "f1"}])
        return AIMessage("an answer " * 100)

    async def main():
        asyncio.get_running_loop().set_debug(True)
        config = parse_config({
            "summarization": {"trigger": {"type": "messages", "value": 6},
                              "keep": {"type": "messages", "value": 1}, "min_gain_tokens": 0},
            "offload": {"tool_token_limit": 800, "preview_chars": 200, "root": sys.argv[1]},
        })
        agent = foldwise.create_agent(config, model=ScriptedChatModel(default=brain),
                                      tools=[fetch], checkpointer=InMemorySaver())
        thread = {"configurable": {"thread_id": "t"}}
        for text in ("fetch it", "two", "three", "four"):
            state = await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, thread)
        print(json.dumps({
            "available": _telemetry.AVAILABLE,
            "compactions": len(state["compactions"]),
            "offloads": sorted({ref["kind"] for ref in state["offloads"]}),
            "otel_loaded": any(m.startswith("opentelemetry.") for m in sys.modules),
        }))

    asyncio.run(main())
    """
)


def test_foldwise_runs_without_the_opentelemetry_api(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", ABSENT, str(tmp_path / "artifacts")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "available": False,
        "compactions": result["compactions"],
        "offloads": ["archive", "tool"],
        "otel_loaded": False,
    }
    assert result["compactions"] >= 1
    # asyncio debug mode reports coroutines never awaited and tasks destroyed while pending.
    assert "never awaited" not in out.stderr and "destroyed but it is pending" not in out.stderr


CONFIGURE = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import metrics, trace
    if sys.argv[1] == "app":  # the application installed its own providers first
        from opentelemetry.sdk.trace import TracerProvider
        trace.set_tracer_provider(TracerProvider())
    before = trace.get_tracer_provider()
    from foldwise.gateway._telemetry import configure_from_env
    configured = configure_from_env()
    print(json.dumps({
        "configured": configured,
        "tracer_provider": type(trace.get_tracer_provider()).__name__,
        "meter_provider": type(metrics.get_meter_provider()).__name__,
        "unchanged": trace.get_tracer_provider() is before,
    }))
    """
)


def _configure(case: str, env: dict[str, str]) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", CONFIGURE, case],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_configure_from_env_installs_the_sdk_only_when_asked() -> None:
    assert _configure("plain", {})["configured"] is False
    console = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console"}
    result = _configure("plain", console)
    assert result["configured"] is True
    assert (result["tracer_provider"], result["meter_provider"]) == (
        "TracerProvider",
        "MeterProvider",
    )
    disabled = _configure("plain", {**console, "OTEL_SDK_DISABLED": "true"})
    assert disabled["configured"] is False
    assert disabled["tracer_provider"] == "ProxyTracerProvider"
    # An application that configured OpenTelemetry itself keeps its providers.
    own = _configure("app", console)
    assert own["configured"] is False and own["unchanged"] is True
    # An OTLP endpoint alone selects the OTLP/HTTP exporter the `otel` extra ships.
    endpoint = _configure("plain", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert endpoint["configured"] is True


def test_foldwise_serve_exports_spans_and_metrics_from_otel_env(tmp_path: Path) -> None:
    env = {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "console",
        "OTEL_SERVICE_NAME": "foldwise-e2e",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }
    with OpenAIStub(lambda body: "Hello from the stub.") as stub:
        config_path = write_config(tmp_path, stub)
        server = start_serve(config_path, tmp_path, env=child_env(env, pythonpath=[ROOT]))
        url = server.url
        try:
            thread = httpx.post(url + "/threads", json={}).json()["thread_id"]
            r = httpx.post(
                f"{url}/threads/{thread}/runs/wait",
                json={"assistant_id": "agent", "input": user("hi")},
                timeout=30,
            )
            assert r.status_code == 200, r.text
        finally:
            server.stop()
    log = server.log_text()
    assert server.returncode == 0, log
    assert '"name": "invoke_agent agent"' in log
    assert '"name": "chat stub"' in log
    assert '"gen_ai.usage.input_tokens"' in log
    assert f'"gen_ai.conversation.id": "{thread}"' in log
    assert '"service.name": "foldwise-e2e"' in log
    assert '"name": "foldwise.run.duration"' in log
    assert '"name": "foldwise.lease.wait"' in log


async def test_langchain_tracers_see_every_call_beside_foldwise_spans(tmp_path: Path) -> None:
    """LangSmith's tracer is a LangChain callback handler: one added the same way (a configure
    hook, as `LANGSMITH_TRACING=true` does) still sees the run's model calls."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _telemetry.use_providers(provider)

    def brain(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("fine")

    model = ScriptedChatModel(default=brain)
    config = gateway_config(tmp_path, {"summarization": {"enabled": False}})
    try:
        async with open_app(config, scripted_factory(model)) as (c, _):
            await c.post("/threads", json={"thread_id": "ls"})
            with collect_runs() as collected:
                r = await c.post(
                    "/threads/ls/runs/wait", json={"assistant_id": "agent", "input": user("x")}
                )
            assert r.status_code == 200, r.text
    finally:
        _telemetry.use_providers()
        provider.shutdown()

    def walk(runs: list[Any]) -> list[Any]:
        return [r for run in runs for r in (run, *walk(run.child_runs))]

    traced = walk(collected.traced_runs)
    assert [r.run_type for r in traced].count("llm") == 1, [r.name for r in traced]
    assert [s.name for s in exporter.get_finished_spans()].count("chat scripted") == 1
