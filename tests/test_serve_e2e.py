"""End to end: `foldwise serve` in a subprocess, ChatOpenAI against the OpenAI stub, the SDK.

The server runs `langchain_openai:ChatOpenAI` pointed at `tests.support.OpenAIStub` (plain and
streamed completions, tool calls, usage) and is driven with the official `langgraph_sdk`
client. The SourceLens scenario (a pasted 8,305-character proposal, 47,000-character retrieval
results from a configured tool, compaction) runs through HTTP, and a restart on the same SQLite
file shows the same state, transcript and receipts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_client

from tests.support import OpenAIStub
from tests.support.gateway_tools import RETRIEVAL_CHARS

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = "SUMMARY: the user pasted a proposal for review; six retrievals were gathered."
RETRIEVALS = 6


def proposal() -> str:
    paragraph = (
        "Proposal section {n}: the ingestion service must keep raw documents for 30 days, "
        "index them nightly, and never drop a citation. Budget owner: Dana (ext. 4417). "
    )
    text = "".join(paragraph.format(n=i) for i in range(60))[:8305]
    assert len(text) == 8305
    return text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def is_summarizer(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and "<new_messages>" in _text(messages[0].get("content"))


class Brain:
    """Answers the stub's requests like a model would, for each conversation of the test."""

    def __init__(self) -> None:
        self.retrievals = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        if is_summarizer(body):
            return SUMMARY
        messages = body["messages"]
        last = messages[-1]
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        latest = users[-1] if users else ""
        if "review this proposal" in latest:
            if self.retrievals < RETRIEVALS:
                self.retrievals += 1
                query = f"retention rule {self.retrievals}"
                return {
                    "tool_calls": [{"name": "retrieve_documents", "arguments": {"query": query}}]
                }
            return "Review complete: the proposal meets the 30-day retention requirement."
        if "define" in latest:
            if last.get("role") == "tool":
                return {"content": "Folding means bending over.", "usage": {"prompt_tokens": 321}}
            return {"tool_calls": [{"name": "lookup_term", "arguments": {"term": "fold"}}]}
        return "Hello from the stub, streamed in small pieces."


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(
    config_path: Path,
    cwd: Path,
    *options: str,
    env: dict[str, str] | None = None,
    start_seconds: float = 60,
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """Start `foldwise serve` on a free loopback port and wait until `/health` answers.

    Returns the process, its URL and its log file; the caller stops the process.
    """
    port = _free_port()
    pythonpath = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": pythonpath, **(env or {})}
    log_path = cwd / f"server-{port}.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--config", str(config_path)]
    command += ["--port", str(port), "--log-level", "warning", *options]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_seconds
    while True:
        if process.poll() is not None:
            pytest.fail(f"foldwise serve exited early:\n{log_path.read_text()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url, log_path
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            process.wait(10)  # reaped here, so no later test sees a ResourceWarning for it
            pytest.fail(f"foldwise serve did not start:\n{log_path.read_text()}")
        time.sleep(0.1)


@contextmanager
def running_server(config_path: Path, cwd: Path, *options: str) -> Iterator[str]:
    """Start `foldwise serve` on a free loopback port; stop it with SIGTERM afterwards."""
    process, url, log_path = launch(config_path, cwd, *options)
    try:
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert process.returncode == 0, log_path.read_text()


def write_config(tmp_path: Path, stub: OpenAIStub) -> Path:
    config = {
        "models": [
            {
                "name": "stub",
                "use": "langchain_openai:ChatOpenAI",
                "model": "stub",
                "base_url": stub.url + "/v1",
                "api_key": "test-key",
                "max_retries": 0,
                "stream_usage": True,
                "context_window": 128000,
            }
        ],
        "tools": [
            {"use": "tests.support.gateway_tools:retrieve_documents"},
            {"use": "tests.support.gateway_tools:lookup_term"},
        ],
        "summarization": {
            "trigger": {"type": "tokens", "value": 7000},
            "keep": {"type": "tokens", "value": 2500},
            "fallback": None,
        },
        "offload": {"tool_token_limit": 5000, "root": "artifacts"},
        "storage": {"url": "sqlite:///data/foldwise.db"},
    }
    path = tmp_path / "foldwise.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


async def test_sdk_against_a_served_gateway(tmp_path: Path) -> None:
    text = proposal()
    brain = Brain()
    with OpenAIStub(brain, chunk_size=6) as stub:
        config_path = write_config(tmp_path, stub)
        with running_server(config_path, tmp_path) as url:
            async with get_client(url=url, api_key=None) as client:
                # -- a plain run, then a tool call, then streaming -----------------------------
                thread = await client.threads.create(metadata={"suite": "e2e"})
                thread_id = thread["thread_id"]
                assert thread["status"] == "idle"
                values = await client.runs.wait(
                    thread_id, "agent", input={"messages": [{"role": "user", "content": "hi"}]}
                )
                assert (
                    values["messages"][-1]["content"]
                    == "Hello from the stub, streamed in small pieces."
                )
                assert values["messages"][-1]["usage_metadata"]["input_tokens"] > 0
                values = await client.runs.wait(
                    thread_id,
                    "agent",
                    input={"messages": [{"role": "user", "content": "define fold"}]},
                )
                kinds = [m["type"] for m in values["messages"][2:]]
                assert kinds == ["human", "ai", "tool", "ai"]
                assert values["messages"][3]["tool_calls"][0]["name"] == "lookup_term"
                assert values["messages"][4]["content"].startswith("fold: to fold is")
                assert values["messages"][5]["usage_metadata"]["input_tokens"] == 321
                parts = [
                    part
                    async for part in client.runs.stream(
                        thread_id,
                        "agent",
                        input={"messages": [{"role": "user", "content": "hello again"}]},
                        stream_mode=["messages-tuple", "values"],
                    )
                ]
                events = [p.event for p in parts]
                assert events[0] == "metadata" and "values" in events
                chunks = [p.data[0] for p in parts if p.event == "messages"]
                assert len(chunks) > 3, "ChatOpenAI should stream token chunks"
                assert (
                    "".join(c["content"] for c in chunks)
                    == "Hello from the stub, streamed in small pieces."
                )
                assert any(r.get("stream") for r in stub.requests)  # streamed completions
                assert any(not r.get("stream") for r in stub.requests)  # and plain ones
                state = await client.threads.get_state(thread_id)
                assert len(state["values"]["messages"]) == 8
                streamed_answer = state["values"]["messages"][-1]
                assert streamed_answer["usage_metadata"]["input_tokens"] > 0  # the usage chunk
                assert state["checkpoint"]["thread_id"] == thread_id
                history = await client.threads.get_history(thread_id, limit=5)
                assert len(history) == 5
                assert history[0]["checkpoint"] == state["checkpoint"]
                found = await client.threads.search(metadata={"suite": "e2e"})
                assert [t["thread_id"] for t in found] == [thread_id]

                # -- SourceLens: pasted proposal + oversized retrievals + compaction -------------
                review = await client.threads.create()
                review_id = review["thread_id"]
                question = f"Please review this proposal:\n{text}"
                parts = [
                    part
                    async for part in client.runs.stream(
                        review_id,
                        "agent",
                        input={"messages": [{"role": "user", "content": question}]},
                        stream_mode=["messages-tuple", "updates"],
                    )
                ]
                assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
                streamed = " ".join(str(p.data) for p in parts if p.event == "messages")
                assert "SUMMARY:" not in streamed  # the summarizer never streams

            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                receipts = (await http.get(f"/threads/{review_id}/compactions")).json()
                transcript = (
                    await http.get(f"/threads/{review_id}/transcript", params={"limit": 1000})
                ).json()
                snapshot = (await http.get(f"/threads/{review_id}/state")).json()
                context = (await http.get(f"/threads/{review_id}/context")).json()
                compacted = await http.post(
                    f"/threads/{thread_id}/compact", json={"keep": {"type": "messages", "value": 2}}
                )
                first_transcript = (await http.get(f"/threads/{thread_id}/transcript")).json()

    # The model's final request (not a summarizer call) carries the proposal verbatim.
    final = [r for r in stub.requests if not is_summarizer(r)][-1]
    assert any(text in _text(m.get("content")) for m in final["messages"])
    assert brain.retrievals == RETRIEVALS
    assert any(is_summarizer(r) for r in stub.requests)
    assert receipts and receipts[0]["trigger"] in ("tokens", "budget"), json.dumps(context)
    entries = transcript["entries"]
    messages = [e["message"] for e in entries if e["kind"] == "message"]
    assert [m["type"] for m in messages] == ["human"] + ["ai", "tool"] * RETRIEVALS + ["ai"]
    assert messages[0]["content"] == question
    assert "compaction" in [e["kind"] for e in entries]
    # Oversized results were stored outside the context (the transcript shows their previews).
    assert all(len(m["content"]) < RETRIEVAL_CHARS for m in messages if m["type"] == "tool")
    assert snapshot["values"]["summary_text"] == SUMMARY
    assert len(snapshot["values"]["messages"]) < len(messages)
    assert context["tokens"]["summary"] > 0 and context["window"] == 128000
    assert compacted.status_code == 200 and compacted.json()["compacted"] is True
    assert first_transcript["entries"][-1]["kind"] == "compaction"

    # -- restart on the same SQLite file: the same state, transcript and receipts -------------
    with OpenAIStub(brain) as stub2:
        write_config(tmp_path, stub2)
        with running_server(config_path, tmp_path) as url:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                assert (await http.get(f"/threads/{review_id}/state")).json() == snapshot
                again = (
                    await http.get(f"/threads/{review_id}/transcript", params={"limit": 1000})
                ).json()
                assert again == transcript
                assert (await http.get(f"/threads/{review_id}/compactions")).json() == receipts
            async with get_client(url=url, api_key=None) as client:
                restored = await client.threads.get_state(thread_id)
                assert restored["values"]["summary_text"] == SUMMARY
                assert (await client.threads.get(review_id))["status"] == "idle"


@pytest.mark.postgres
@pytest.mark.slow  # three cold interpreter starts (~17 s); restarts are also covered in-process
async def test_two_workers_on_postgres_and_a_restart(tmp_path: Path) -> None:
    from tests.support.gateway import drop_schema, postgres_url

    storage_url, dsn, schema = postgres_url()
    try:
        with OpenAIStub(default="an answer from the stub " * 20) as stub:
            config_path = write_config(tmp_path, stub)
            data = yaml.safe_load(config_path.read_text())
            data["storage"]["url"] = storage_url
            data["summarization"] = {"keep": {"type": "messages", "value": 2}, "min_gain_tokens": 0}
            config_path.write_text(yaml.safe_dump(data))
            with running_server(config_path, tmp_path, "--workers", "2") as url:
                async with get_client(url=url, api_key=None) as client:
                    thread_id = (await client.threads.create())["thread_id"]
                    for text in ("one", "two", "three"):
                        await client.runs.wait(
                            thread_id,
                            "agent",
                            input={"messages": [{"role": "user", "content": text}]},
                        )
                    state = await client.threads.get_state(thread_id)
                async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                    assert (await http.get("/health")).json()["storage"] == "postgres"
                    compacted = (await http.post(f"/threads/{thread_id}/compact", json={})).json()
                    assert compacted["compacted"] is True
                    snapshot = (await http.get(f"/threads/{thread_id}/state")).json()
                    transcript = (await http.get(f"/threads/{thread_id}/transcript")).json()
                    receipts = (await http.get(f"/threads/{thread_id}/compactions")).json()
            assert len(state["values"]["messages"]) == 6
            assert [e["kind"] for e in transcript["entries"]] == ["message"] * 6 + ["compaction"]
            with running_server(config_path, tmp_path) as url:
                async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                    assert (await http.get(f"/threads/{thread_id}/state")).json() == snapshot
                    assert (await http.get(f"/threads/{thread_id}/transcript")).json() == transcript
                    assert (await http.get(f"/threads/{thread_id}/compactions")).json() == receipts
    finally:
        drop_schema(dsn, schema)


def test_serve_refuses_a_broken_configuration(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from foldwise.cli import app

    result = CliRunner().invoke(app, ["serve", "--config", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "file not found" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("gateway: {port: 99999}\n")
    result = CliRunner().invoke(app, ["serve", "--config", str(bad)])
    assert result.exit_code == 2 and "gateway.port" in result.output

    # A tool that cannot be imported: one line, exit 2, before anything is opened.
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "use": "foldwise.testing:ScriptedChatModel"}],
                "tools": [{"use": "tests.support.no_such_module:tool"}],
            }
        )
    )
    result = CliRunner().invoke(app, ["serve", "--config", str(broken)])
    assert result.exit_code == 2
    assert "tools[0].use" in result.output and "no_such_module" in result.output
    assert not (tmp_path / ".foldwise").exists()

    # A database that cannot be opened fails the start-up: exit 1, the reason in the log.
    unreachable = tmp_path / "unreachable.yaml"
    unreachable.write_text(
        yaml.safe_dump(
            {
                "models": [{"name": "m", "use": "foldwise.testing:ScriptedChatModel"}],
                "storage": {"url": "sqlite:////proc/no-such-dir/db.sqlite"},
            }
        )
    )
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "foldwise.cli",
            "serve",
            "--config",
            str(unreachable),
            "--port",
            "0",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 1, process.stderr
    assert "error: the gateway could not start" in process.stderr
