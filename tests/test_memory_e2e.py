"""Long-term memory through a real `foldwise serve` (OpenAI-compatible stub, API keys).

Alice states facts in thread A (English and Chinese); a new thread B of hers gets them in the
durable data block and finds them with the `memory_search` tool; Bob sees none of them; a
changed fact in thread C supersedes the old one in thread D's injection. The gateway's own
memory worker applies the queued updates in the background.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from foldwise.bench._serve import serving, stub_model_entry, write_config
from tests.support import OpenAIStub

KEYS = {"alice": "key-alice", "bob": "key-bob"}


class Brain:
    """Answers `ok`, or calls `memory_search` when asked to, then reports its result."""

    def __call__(self, body: dict[str, Any]) -> Any:
        messages = body["messages"]
        last = messages[-1]
        if last.get("role") == "tool":
            return f"search said: {last.get('content')}"
        text = str(last.get("content") or "")
        if text.startswith("search memory for "):
            query = text.removeprefix("search memory for ")
            return {"tool_calls": [{"name": "memory_search", "arguments": {"query": query}}]}
        return "ok"


def _config(tmp_path: Path, stub: OpenAIStub) -> Path:
    config = {
        "models": [stub_model_entry(stub.url)],
        "storage": {"url": "sqlite:///data/foldwise.db"},
        "memory": {"enabled": True, "mode": "both", "debounce_seconds": 0},
        "gateway": {"auth": {"api_keys": [{"key": k, "user": u} for u, k in KEYS.items()]}},
    }
    return write_config(tmp_path, config)


def _run(client: httpx.Client, user: str, thread: str, text: str) -> dict[str, Any]:
    headers = {"x-api-key": KEYS[user]}
    client.post("/threads", json={"thread_id": thread, "if_exists": "do_nothing"}, headers=headers)
    body = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}}
    answer = client.post(f"/threads/{thread}/runs/wait", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _facts(client: httpx.Client, user: str) -> list[str]:
    listed = client.get("/memory/facts", headers={"x-api-key": KEYS[user]})
    assert listed.status_code == 200, listed.text
    return [f["text"] for f in listed.json()["facts"] if f["status"] == "active"]


def _wait_for(client: httpx.Client, user: str, needle: str) -> list[str]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        facts = _facts(client, user)
        if any(needle in fact for fact in facts):
            return facts
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} never reached {user}'s memory: {_facts(client, user)}")


def _data_messages(body: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content"))
        for m in body["messages"]
        if "<durable_context_data>" in str(m.get("content"))
    )


def test_memory_across_threads_users_and_changes(tmp_path: Path) -> None:
    with (
        OpenAIStub(Brain()) as stub,
        serving(_config(tmp_path, stub), tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        _run(client, "alice", "a", "I live in Berlin. 我喜欢喝茶。")
        _wait_for(client, "alice", "Berlin")
        _wait_for(client, "alice", "茶")

        _run(client, "alice", "b", "Where should I go this weekend?")
        block = _data_messages(stub.requests[-1])
        assert "Berlin" in block and "茶" in block
        for message in stub.requests[-1]["messages"]:
            if message.get("role") == "system":
                assert "Berlin" not in str(message.get("content"))
        found = _run(client, "alice", "b", "search memory for 喝茶")
        tool = [m for m in found["messages"] if m.get("type") == "tool"][-1]
        assert "茶" in json.loads(tool["content"])["facts"][0]["text"]

        _run(client, "bob", "x", "What do you know about me?")
        assert "Berlin" not in _data_messages(stub.requests[-1])
        assert _facts(client, "bob") == []

        _run(client, "alice", "c", "I moved to Munich.")
        facts = _wait_for(client, "alice", "Munich")
        assert not any("Berlin" in fact for fact in facts)  # superseded, not current
        _run(client, "alice", "d", "Any plans for tonight?")
        block = _data_messages(stub.requests[-1])
        assert "Munich" in block and "Berlin" not in block

        events = client.get("/memory/events", headers={"x-api-key": KEYS["alice"]}).json()
        actions = {e["action"] for e in events["events"]}
        assert {"add", "supersede"} <= actions
        assert all(e["namespace"][:2] == ["users", "alice"] for e in events["events"])
        queue = client.get("/memory/queue", headers={"x-api-key": KEYS["alice"]}).json()
        assert not queue["counts"].get("dead") and queue["dead"] == []
