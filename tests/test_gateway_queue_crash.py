"""A restart during background runs loses none: `foldwise serve` killed with SIGKILL, restarted.

Each cycle: a background run is inside its model call (the stub model holds it), two more runs
wait queued behind it (`multitask_strategy: enqueue`), and the server is SIGKILLed. The next
server on the same database must finish the queued runs in order, fail the run that was
executing ("worker died during the run"), leave the thread idle and usable, and the transcript
must hold every accepted input. Two cycles per database, SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml
from psycopg import sql

from foldwise.bench._serve import start_serve
from tests.support import OpenAIStub
from tests.test_serve_e2e import ROOT, write_config

_FINAL = ("success", "error", "interrupted")


class _Model:
    """The stub model's brain: answers at once, except to a `hold ...` message (held)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, body: dict[str, Any]) -> str:
        last = body["messages"][-1].get("content")
        text = last if isinstance(last, str) else json.dumps(last)
        if text.startswith("hold"):
            self.entered.set()
            self.released.wait(60)
        return f"answer to {text}"


def _expire_leases(storage_url: str) -> None:
    """The killed server's leases would lapse after their TTL; make them lapse now."""
    if storage_url.startswith("sqlite:///"):
        with sqlite3.connect(storage_url.removeprefix("sqlite:///")) as conn:
            conn.execute("UPDATE thread_locks SET expires_at = acquired_at")
        return
    dsn, schema = storage_url.split("?schema=")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.thread_locks SET expires_at = acquired_at").format(
                sql.Identifier(schema)
            )
        )


def _run(url: str, thread: str, text: str, **extra: Any) -> dict[str, Any]:
    body = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": text}]},
        **extra,
    }
    r = httpx.post(f"{url}/threads/{thread}/runs", json=body, timeout=30)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def _until_final(url: str, thread: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        run: dict[str, Any] = httpx.get(f"{url}/threads/{thread}/runs/{run_id}", timeout=10).json()
        if run["status"] in _FINAL:
            return run
        assert time.monotonic() < deadline, f"run {run_id} never finished: {run}"
        time.sleep(0.1)


def test_sigkill_during_background_runs_loses_no_run(tmp_path: Path, storage_url: str) -> None:
    model = _Model()
    with OpenAIStub(model) as stub:
        config_path = write_config(tmp_path, stub)
        data = yaml.safe_load(config_path.read_text())
        data["storage"] = {"url": storage_url}
        config_path.write_text(yaml.safe_dump(data))
        accepted: list[str] = []
        expected_state: list[str] = []
        thread = ""
        for cycle in range(2):
            model.entered.clear()
            model.released.clear()
            server = start_serve(config_path, tmp_path, pythonpath=[ROOT])
            process, url = server.process, server.url
            try:
                if not thread:
                    thread = httpx.post(url + "/threads", json={}).json()["thread_id"]
                held = _run(url, thread, f"hold {cycle}")
                assert model.entered.wait(60), "the model was never called"
                queued = [
                    _run(url, thread, f"queued {cycle}.{i}", multitask_strategy="enqueue")
                    for i in range(2)
                ]
                assert [q["status"] for q in queued] == ["pending", "pending"]
                accepted += [f"hold {cycle}", *(f"queued {cycle}.{i}" for i in range(2))]
            finally:
                process.send_signal(signal.SIGKILL)
                process.wait()
            _expire_leases(storage_url)
            model.released.set()  # the dead server's model call ends into the void

            server = start_serve(config_path, tmp_path, pythonpath=[ROOT])
            process, url, log = server.process, server.url, server.log_path
            try:
                done = [_until_final(url, thread, q["run_id"]) for q in queued]
                dead = _until_final(url, thread, held["run_id"])
                thread_row = httpx.get(f"{url}/threads/{thread}").json()
                entries = httpx.get(
                    f"{url}/threads/{thread}/transcript", params={"limit": 1000}
                ).json()["entries"]
                state = httpx.get(f"{url}/threads/{thread}/state").json()["values"]
                after = httpx.post(
                    f"{url}/threads/{thread}/runs/wait",
                    json={
                        "assistant_id": "agent",
                        "input": {"messages": [{"role": "user", "content": f"after {cycle}"}]},
                    },
                    timeout=60,
                )
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(30)
            assert [d["status"] for d in done] == ["success", "success"], log.read_text()
            assert dead["status"] == "error"
            assert dead["error"] == "worker died during the run"
            assert thread_row["status"] == "idle"
            transcript = [e["message"]["content"] for e in entries]
            for text in accepted:
                assert text in transcript, f"accepted input {text!r} is not in the transcript"
            # The queued runs ran in order, after the held input (which got no answer).
            expected_state += [f"hold {cycle}"]
            for i in range(2):
                expected_state += [f"queued {cycle}.{i}", f"answer to queued {cycle}.{i}"]
            assert [m["content"] for m in state["messages"]] == expected_state
            assert after.status_code == 200, after.text
            accepted.append(f"after {cycle}")
            expected_state += [f"after {cycle}", f"answer to after {cycle}"]
