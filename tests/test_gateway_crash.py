"""A crash between the checkpoint commit and the transcript/receipt write loses nothing for good.

The in-process tests write a checkpoint the transcript and receipts tables never heard of (what
a process killed inside that window leaves) and check that the next run or compaction records
it. `test_killed_inside_the_window_then_restarted` does it for real: `foldwise serve` in a
subprocess, paused inside the window by the test-only `FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT`
hook, SIGKILLed, and restarted on the same SQLite file.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from langchain_core.messages import AIMessage, BaseMessage

from foldwise.bench._serve import child_env, open_app, start_serve
from foldwise.compaction import CompactionReceipt
from foldwise.testing import ScriptedChatModel
from tests.support import OpenAIStub
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory, user
from tests.test_serve_e2e import ROOT, write_config

SUMMARY = "SUMMARY: the conversation so far."


def _receipt(thread_id: str) -> dict[str, Any]:
    return CompactionReceipt(
        thread_id=thread_id,
        trigger="messages",
        reason="messages 4 >= 4",
        tokens_before=400,
        tokens_after=100,
        messages_removed=2,
        messages_preserved=2,
        messages_rescued=0,
        summary_chars=len(SUMMARY),
        model_used="scripted",
    ).to_dict()


def _brain(messages: list[BaseMessage]) -> str:
    return SUMMARY if is_summarizer_call(messages) else "an answer"


async def _transcript(client: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/threads/{thread_id}/transcript", params={"limit": 1000})
    assert r.status_code == 200, r.text
    entries: list[dict[str, Any]] = r.json()["entries"]
    return entries


def _labels(entries: list[dict[str, Any]]) -> list[str]:
    return [
        e["kind"] if e["kind"] == "compaction" else f"{e['message']['type']}:{e['message_id']}"
        for e in entries
    ]


async def test_a_run_start_records_what_a_crash_left_in_the_state_only(tmp_path: Path) -> None:
    model = ScriptedChatModel(default=_brain)
    async with open_app(gateway_config(tmp_path), scripted_factory(model)) as (c, app):
        await c.post("/threads", json={"thread_id": "t"})
        first = {"assistant_id": "agent", "input": user("one", id="h1")}
        assert (await c.post("/threads/t/runs/wait", json=first)).status_code == 200
        graph = app.state.gateway.agents.get().graph
        config = {"configurable": {"thread_id": "t"}}
        # What a kill right after a checkpoint commit leaves: the state has an AI message and
        # a compaction receipt that the transcript and receipts tables never got.
        receipt = _receipt("t")
        await graph.aupdate_state(
            config,
            {"messages": [AIMessage("lost answer", id="lost-1")], "compactions": [receipt]},
            as_node="model",
        )
        assert "ai:lost-1" not in _labels(await _transcript(c, "t"))
        assert (await c.get("/threads/t/compactions")).json() == []

        second = {"assistant_id": "agent", "input": user("two", id="h2")}
        assert (await c.post("/threads/t/runs/wait", json=second)).status_code == 200
        entries = await _transcript(c, "t")
        labels = _labels(entries)
        # Recovered first (receipt and marker, then the message), then the new run.
        assert labels[labels.index("compaction") :][:3] == ["compaction", "ai:lost-1", "human:h2"]
        assert labels.count("ai:lost-1") == 1
        marker = entries[labels.index("compaction")]
        assert marker["message"]["receipt_id"] == receipt["id"]
        receipts = (await c.get("/threads/t/compactions")).json()
        assert [r["id"] for r in receipts] == [receipt["id"]]

        # Reconciling is idempotent: a further run records nothing twice.
        third = {"assistant_id": "agent", "input": user("three", id="h3")}
        assert (await c.post("/threads/t/runs/wait", json=third)).status_code == 200
        again = _labels(await _transcript(c, "t"))
        assert again[: len(labels)] == labels and again.count("compaction") == 1
        assert len((await c.get("/threads/t/compactions")).json()) == 1


async def test_a_compaction_records_lost_messages_before_removing_them(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path,
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 1000},
                "keep": {"type": "messages", "value": 1},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "none"},
            }
        },
    )
    model = ScriptedChatModel(default=_brain)
    async with open_app(config, scripted_factory(model)) as (c, app):
        await c.post("/threads", json={"thread_id": "k"})
        for i in range(2):
            body = {"assistant_id": "agent", "input": user(f"q{i}", id=f"q{i}")}
            assert (await c.post("/threads/k/runs/wait", json=body)).status_code == 200
        graph = app.state.gateway.agents.get().graph
        await graph.aupdate_state(
            {"configurable": {"thread_id": "k"}},
            {"messages": [AIMessage("lost before compaction", id="lost-2")]},
            as_node="model",
        )
        r = await c.post("/threads/k/compact", json={})
        assert r.status_code == 200 and r.json()["compacted"] is True, r.text
        labels = _labels(await _transcript(c, "k"))
        assert labels[-2:] == ["ai:lost-2", "compaction"]
        state = (await c.get("/threads/k/state")).json()["values"]
        assert "lost-2" not in [m["id"] for m in state["messages"][:-1]]


# -- the real thing: a process killed inside the window -------------------------------------


@contextmanager
def _server(config_path: Path, cwd: Path, pause_marker: Path | None) -> Iterator[tuple[Any, str]]:
    """`foldwise serve` on a free port; with `pause_marker`, armed with the test-only pause."""
    env = {"FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT": str(pause_marker)} if pause_marker else {}
    server = start_serve(config_path, cwd, env=child_env(env, pythonpath=[ROOT]))
    process = server.process
    try:
        yield process, server.url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _post_in_background(url: str, path: str, body: dict[str, Any]) -> threading.Thread:
    """Send a request whose server will be killed before it answers."""

    def send() -> None:
        with contextlib.suppress(httpx.TransportError):  # the server is killed: expected
            httpx.post(url + path, json=body, timeout=120)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _kill_when_paused(process: Any, marker: Path, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None, "the server exited instead of pausing"
        assert time.monotonic() < deadline, "the server never paused after the checkpoint"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    thread.join(30)


def _expire_leases(database: Path) -> None:
    """The killed process's lease would expire after its TTL; expire it now."""
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE thread_locks SET expires_at = 0")


def _stub_answer(body: dict[str, Any]) -> str:
    first = body["messages"][0].get("content")
    text = first if isinstance(first, str) else json.dumps(first)
    return SUMMARY if "<new_messages>" in text else "an answer from the stub"


def test_killed_inside_the_window_then_restarted(tmp_path: Path) -> None:
    history = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "third question"},
    ]
    with OpenAIStub(_stub_answer) as stub:
        config_path = write_config(tmp_path, stub)
        data = yaml.safe_load(config_path.read_text())
        data["summarization"] = {
            "trigger": {"type": "messages", "value": 1000},
            "keep": {"type": "messages", "value": 2},
            "min_gain_tokens": 0,
        }
        config_path.write_text(yaml.safe_dump(data))
        database = tmp_path / "data" / "foldwise.db"

        # 1. A run is killed after its AI answer reached the checkpoint, before the transcript.
        marker = tmp_path / "paused-run"
        with _server(config_path, tmp_path, marker) as (process, url):
            thread_id = httpx.post(url + "/threads", json={}).json()["thread_id"]
            body = {"assistant_id": "agent", "input": {"messages": history}}
            sender = _post_in_background(url, f"/threads/{thread_id}/runs/wait", body)
            _kill_when_paused(process, marker, sender)
        _expire_leases(database)

        # 2. Restarted: the state has the answer, the transcript not yet. A manual compaction
        # first records it, then is killed after its checkpoint, before its receipt.
        marker = tmp_path / "paused-compaction"
        with _server(config_path, tmp_path, marker) as (process, url):
            state = httpx.get(f"{url}/threads/{thread_id}/state").json()["values"]
            answer = state["messages"][-1]
            assert answer["type"] == "ai" and answer["content"] == "an answer from the stub"
            entries = httpx.get(f"{url}/threads/{thread_id}/transcript").json()["entries"]
            assert answer["id"] not in [e["message_id"] for e in entries]  # the lost answer
            sender = _post_in_background(url, f"/threads/{thread_id}/compact", {})
            _kill_when_paused(process, marker, sender)
        _expire_leases(database)

        # 3. Restarted again: the compaction is in the state without a receipt; the next run
        # records the receipt and its marker, then its own messages.
        with _server(config_path, tmp_path, None) as (_process, url):
            state = httpx.get(f"{url}/threads/{thread_id}/state").json()["values"]
            assert state["summary_text"] == SUMMARY
            receipt_id = state["compactions"][-1]["id"]
            assert httpx.get(f"{url}/threads/{thread_id}/compactions").json() == []
            r = httpx.post(
                f"{url}/threads/{thread_id}/runs/wait",
                json={
                    "assistant_id": "agent",
                    "input": {"messages": [user("after")["messages"][0]]},
                },
                timeout=60,
            )
            assert r.status_code == 200, r.text
            receipts = httpx.get(f"{url}/threads/{thread_id}/compactions").json()
            entries = httpx.get(
                f"{url}/threads/{thread_id}/transcript", params={"limit": 1000}
            ).json()["entries"]
            runs = httpx.get(f"{url}/threads/{thread_id}/runs").json()

    assert [r["id"] for r in receipts] == [receipt_id]
    kinds = [e["kind"] if e["kind"] == "compaction" else e["message"]["type"] for e in entries]
    assert kinds == ["human", "ai", "human", "ai", "human", "ai", "compaction", "human", "ai"]
    assert entries[5]["message_id"] == answer["id"]  # recorded once, in its place
    assert entries[6]["message"]["receipt_id"] == receipt_id
    # The killed run and compaction were failed by the next operations (their worker died).
    assert sorted(r["status"] for r in runs) == ["error", "error", "success"]
    assert {r["error"] for r in runs if r["status"] == "error"} == {"worker died during the run"}
