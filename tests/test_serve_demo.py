"""`foldwise serve --demo` as a real subprocess: preloaded threads, memory, streaming, clean exit.

One demo server is started for the module (`--port 0`); the tests read it over HTTP like the
web page does, stream a new message, and the last test stops it with SIGTERM and checks that it
exits 0 and leaves no temporary directory behind.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage

from foldwise.cli._demo_agents import DEMO_WINDOW, DemoAgents, demo_config, playable
from foldwise.cli._demo_model import DemoChatModel, demo_reply, search_docs
from foldwise.config import OffloadConfig
from foldwise.replay.sessions import SESSION_NAMES, SESSION_TITLES
from foldwise.tokens import get_counter

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(r"^foldwise demo ready: (http://127\.0\.0\.1:(\d+))/ui$")
START_SECONDS = 120


@dataclass
class Demo:
    """A running `foldwise serve --demo` process."""

    process: subprocess.Popen[str]
    url: str
    tmp: Path
    log: Path
    lines: queue.Queue[str | None]
    pump: threading.Thread
    seconds_to_ready: float

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, trust_env=False)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _environment(tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "FOLDWISE_", "LANGSMITH_", "LANGCHAIN_"))
    }
    pythonpath = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # TMPDIR: the demo's temporary directory lands here, so the test can see it is removed.
    return {**env, "PYTHONPATH": pythonpath, "TMPDIR": str(tmp), "LANGSMITH_TRACING": "false"}


def start_demo(tmp: Path, *options: str) -> Demo:
    """Start the demo and return once it printed its ready line (or fail with its log)."""
    log = tmp / "demo.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--demo", "--port", "0", *options]
    started = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=tmp, env=_environment(tmp), stdout=subprocess.PIPE, stderr=sink, text=True
        )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    pump.start()
    try:
        first = lines.get(timeout=START_SECONDS)
    except queue.Empty:
        process.kill()
        process.wait(10)
        pytest.fail(f"the demo printed nothing in {START_SECONDS} s:\n{log.read_text()}")
    match = READY.match(first or "")
    if match is None:
        process.kill()
        process.wait(10)
        pytest.fail(f"unexpected first stdout line {first!r}:\n{log.read_text()}")
    return Demo(process, match.group(1), tmp, log, lines, pump, time.monotonic() - started)


def stop(demo: Demo) -> int:
    """SIGTERM, then the exit status (killed after 30 s)."""
    if demo.process.poll() is None:
        demo.process.send_signal(signal.SIGTERM)
        try:
            demo.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            demo.process.kill()
            demo.process.wait()
    demo.pump.join(10)  # it reads stdout to its end, then the pipe can be closed
    if demo.process.stdout is not None and not demo.pump.is_alive():
        demo.process.stdout.close()
    return demo.process.returncode


def demo_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("foldwise-demo-*"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("demo"))
    try:
        yield running
    finally:
        stop(running)


def threads(demo: Demo) -> list[dict[str, Any]]:
    with demo.client() as client:
        response = client.post("/threads/search", json={"limit": 100})
    assert response.status_code == 200, response.text
    return list(response.json())


def transcript_messages(client: httpx.Client, thread_id: str) -> int:
    count, after = 0, 0
    while True:
        page = client.get(
            f"/threads/{thread_id}/transcript", params={"after_seq": after, "limit": 500}
        ).json()
        count += sum(1 for e in page["entries"] if e["kind"] == "message")
        after = page["next_after_seq"]
        if not page["has_more"]:
            return count


def test_ready_line_names_a_live_loopback_port_and_needs_no_key(demo: Demo) -> None:
    with demo.client() as client:
        assert client.get("/ok").status_code == 200
        assert client.get("/info").status_code == 200
    print(f"demo ready in {demo.seconds_to_ready:.2f} s (process start to ready line)")
    assert len(demo_dirs(demo.tmp)) == 1  # everything is in one temporary directory
    assert (demo_dirs(demo.tmp)[0] / "foldwise.db").is_file()


def test_every_shipped_session_is_a_titled_thread_with_compactions(demo: Demo) -> None:
    found = {t["metadata"].get("session"): t for t in threads(demo) if t["metadata"].get("session")}
    assert sorted(found) == sorted(SESSION_NAMES)
    with demo.client() as client:
        for name, thread in found.items():
            assert thread["metadata"]["title"] == SESSION_TITLES[name]
            thread_id = thread["thread_id"]
            receipts = client.get(f"/threads/{thread_id}/compactions").json()
            assert len(receipts) >= 1, name
            assert all(r["model_used"] == "extractive" for r in receipts), receipts
            in_state = len(thread["values"]["messages"])
            assert transcript_messages(client, thread_id) > in_state, name


def test_tool_outputs_pastes_and_compacted_spans_are_offloaded_to_disk(demo: Demo) -> None:
    kinds: set[str] = set()
    for thread in threads(demo):
        kinds.update(ref["kind"] for ref in thread["values"].get("offloads") or [])
    assert {"tool", "human", "archive"} <= kinds
    files = [p for p in (demo_dirs(demo.tmp)[0] / "artifacts").rglob("*") if p.is_file()]
    assert files, "no artifact file under the demo's artifacts root"


def test_memory_has_facts_a_superseded_value_and_a_quarantined_request(demo: Demo) -> None:
    with demo.client() as client:
        facts = client.get("/memory/facts").json()["facts"]
        quarantine = client.get("/memory/quarantine").json()["facts"]
        queue_status = client.get("/memory/queue").json()
    active = {f["text"] for f in facts if f["status"] == "active"}
    assert {"My name is Mira Okafor", "I moved to Munich last month"} <= active
    superseded = [f for f in facts if f["status"] == "superseded"]
    assert [f["text"] for f in superseded] == ["I live in Berlin"]
    assert superseded[0]["valid_to"] is not None
    held = [f for f in quarantine if "deploy script" in f["text"]]
    assert held and held[0]["status"] == "quarantined" and held[0]["reason"]
    assert not queue_status["counts"].get("pending") and not queue_status["dead"]


def sse(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line.removeprefix("data: "))


def stream_run(client: httpx.Client, thread_id: str, text: str) -> list[tuple[str, Any]]:
    body = {
        "assistant_id": "agent",
        "input": {"messages": [{"type": "human", "content": text}]},
        "stream_mode": ["messages-tuple", "values"],
    }
    with client.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
        assert response.status_code == 200
        return list(sse(response))


def test_a_new_message_streams_from_the_scripted_model(demo: Demo) -> None:
    with demo.client() as client:
        thread_id = client.post("/threads", json={}).json()["thread_id"]
        events = stream_run(client, thread_id, "What does a compaction receipt record?")
        chunks = [data[0]["content"] for name, data in events if name == "messages"]
        assert [name for name, _ in events if name == "error"] == []
        assert len([c for c in chunks if c]) >= 5
        answer = "".join(chunks)
        assert "What does a compaction receipt record?" in answer
        final = [data for name, data in events if name == "values"][-1]["messages"][-1]
        assert final["type"] == "ai" and final["usage_metadata"]["input_tokens"] > 0

        events = stream_run(client, thread_id, "Search the docs for retention owners")
        assert [name for name, _ in events if name == "error"] == []
        state = client.get(f"/threads/{thread_id}/state").json()["values"]
    assert [ref["source"] for ref in state["offloads"]] == ["search_docs"]


def test_sigterm_exits_zero_and_removes_the_temporary_directory(demo: Demo) -> None:
    assert stop(demo) == 0, demo.log.read_text()
    assert demo_dirs(demo.tmp) == []
    rest = []
    while (line := demo.lines.get(timeout=10)) is not None:
        rest.append(line)
    assert rest == []  # the ready line was the only line on stdout


def test_sigterm_while_preloading_exits_zero_and_cleans_up(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--demo", "--port", "0"]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=_environment(tmp_path), stdout=subprocess.PIPE, stderr=sink
        )
    deadline = time.monotonic() + START_SECONDS
    while "Application startup complete" not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0, log.read_text()
    assert stdout == b""  # stopped before the ready line
    assert demo_dirs(tmp_path) == []


def test_demo_refuses_options_it_would_ignore(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--demo", "--workers", "2"]
    done = subprocess.run(
        command, cwd=tmp_path, env=_environment(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--workers" in done.stderr
    assert demo_dirs(tmp_path) == []


# In process: the scripted model and the replay helpers the demo is built from.


def test_demo_model_streams_word_chunks_and_stamps_usage() -> None:
    model = DemoChatModel(chunk_delay=0)
    chunks = list(model.stream([HumanMessage("How big is the window?")]))
    assert len([c for c in chunks if c.content]) >= 5
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert "How big is the window?" in str(merged.content)
    assert merged.usage_metadata is not None and merged.usage_metadata["input_tokens"] > 0
    assert merged.response_metadata["model_name"] == "demo-chat"


async def test_demo_model_streams_asynchronously_with_a_tool_call() -> None:
    model = DemoChatModel(chunk_delay=0).bind_tools([search_docs])
    merged = None
    async for chunk in model.astream([HumanMessage("Search the docs for owners")]):
        merged = chunk if merged is None else merged + chunk
    assert isinstance(merged, AIMessageChunk)
    assert [call["name"] for call in merged.tool_calls] == ["search_docs"]
    assert merged.tool_calls[0]["args"] == {"query": "Search the docs for owners"}


def test_only_a_message_that_opens_with_a_search_verb_calls_the_tool() -> None:
    tools = ["search_docs"]
    pasted = HumanMessage("Review this. [offloaded: use search_offloaded to find more]")
    assert demo_reply([pasted], tool_names=tools).tool_calls == []
    assert demo_reply([HumanMessage("find the owners")], tool_names=tools).tool_calls
    assert demo_reply([HumanMessage("find the owners")], tool_names=[]).tool_calls == []
    call = demo_reply([HumanMessage("find it")], tool_names=tools).tool_calls[0]
    result = ToolMessage(search_docs.invoke({"query": "it"}), tool_call_id=call["id"])
    answer = demo_reply([HumanMessage("find it"), AIMessage("", tool_calls=[call]), result])
    assert answer.tool_calls == [] and "Artifacts tab" in str(answer.content)


def test_search_docs_output_is_large_enough_to_be_offloaded() -> None:
    text = search_docs.invoke({"query": "retention"})
    assert get_counter("estimate").count_text(text) > OffloadConfig().tool_token_limit


def test_playable_folds_a_mid_turn_note_into_the_next_answer() -> None:
    call = {"name": "grep", "args": {}, "id": "c1", "type": "tool_call"}
    answers = [AIMessage("thinking"), AIMessage("look", tool_calls=[call]), AIMessage("done")]
    played = playable(answers)
    assert [a.content for a in played] == ["thinking\n\nlook", "done"]
    assert played[0].tool_calls[0]["id"] == "c1"
    assert answers[1].content == "look"  # the recorded message is not modified


def test_each_replayed_turn_is_one_run_on_the_demo_configuration(tmp_path: Path) -> None:
    agents = DemoAgents()
    for session in agents.sessions.values():
        for answers in session.answers:
            assert all(a.tool_calls for a in answers[:-1]) and not answers[-1].tool_calls
    config = demo_config(tmp_path)
    assert config.model().context_window == DEMO_WINDOW
    assert config.memory.enabled and config.summarization.model_name == "extractive"
    assert config.storage.url == f"sqlite:///{tmp_path / 'foldwise.db'}"
    assert Path(config.offload.root).parent == tmp_path


async def test_a_signal_as_the_server_starts_stops_it_without_a_preload() -> None:
    """SIGTERM right after start-up: uvicorn may close its sockets before the preload looks."""
    import asyncio
    import types

    from foldwise.cli._serve_demo import _preload_and_announce

    stopping = types.SimpleNamespace(started=True, should_exit=True, servers=[])
    serving: asyncio.Task[None] = asyncio.create_task(asyncio.sleep(0))
    await _preload_and_announce(stopping, serving, agents=None, started=0.0)  # type: ignore[arg-type]
    await serving
