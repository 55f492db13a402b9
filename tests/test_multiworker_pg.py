"""`foldwise serve --workers 2` on one PostgreSQL schema: what one worker accepts, the other sees.

One real server (two uvicorn worker processes, a fresh schema, the OpenAI stub as the model) for
the module, driven with `langgraph_sdk`. A client is pinned to one worker by holding a single
keep-alive connection that `/health` (`worker_pid`) said lands there, so each check says which
process accepted a run and which one is asked about it:

- a background run accepted by worker A is read, refused (409, one run per thread), queued
  behind, joined and cancelled through worker B;
- `runs/wait` of a queued run answers with that run's own values even when it ran in the other
  worker and a later queued run has already run too;
- a worker killed with SIGKILL during a run: its lease lapses, the run reads `error` and the
  thread takes new runs through the surviving worker (uvicorn restarts the dead one);
- the memory outbox filled by both workers: every job is applied once, by one worker;
- reads in one worker see what the other just wrote (no per-process cache goes stale).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from langgraph_sdk.client import LangGraphClient
from psycopg import sql

from foldwise.bench._serve import serving
from tests.support import OpenAIStub
from tests.support.gateway import drop_schema, postgres_url
from tests.test_serve_e2e import ROOT, write_config

pytestmark = pytest.mark.postgres

_LEASE_TTL = 3.0
_PIN_ATTEMPTS = 200


class _Model:
    """The stub's brain: answers at once, except to `hold <tag>` (held until released)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.entered: set[str] = set()
        self.released: set[str] = set()

    def __call__(self, body: dict[str, Any]) -> str:
        last = body["messages"][-1].get("content")
        text = last if isinstance(last, str) else str(last)
        if text.startswith("hold "):
            tag = text.removeprefix("hold ")
            with self._cond:
                self.entered.add(tag)
                self._cond.notify_all()
                self._cond.wait_for(lambda: tag in self.released, timeout=60)
        return f"answer to {text}"

    def wait_entered(self, tag: str) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: tag in self.entered, timeout=30), tag

    def release(self, tag: str) -> None:
        with self._cond:
            self.released.add(tag)
            self._cond.notify_all()


class _Served:
    def __init__(self, url: str, storage_url: str, process: subprocess.Popen[bytes]) -> None:
        self.url, self.storage_url, self.process = url, storage_url, process
        self.dsn, self.schema = storage_url.split("?schema=")

    def query(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run SQL on the server's schema (`{s}` is the schema)."""
        text = sql.SQL(statement).format(s=sql.Identifier(self.schema))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(text, args)
            return cursor.fetchall() if cursor.description else []


_MODEL = _Model()


def _config(tmp: Path, stub: OpenAIStub, storage_url: str) -> Path:
    """`test_serve_e2e`'s configuration on PostgreSQL, with memory and a short lease."""
    path = write_config(tmp, stub)
    config = yaml.safe_load(path.read_text())
    config["storage"]["url"] = storage_url
    config["summarization"] = {"keep": {"type": "messages", "value": 2}, "min_gain_tokens": 0}
    config["memory"] = {"enabled": True, "debounce_seconds": 0}
    config["gateway"] = {"lease_ttl_seconds": _LEASE_TTL}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Served]:
    storage_url, dsn, schema = postgres_url()
    tmp = tmp_path_factory.mktemp("multiworker")
    try:
        with OpenAIStub(_MODEL) as stub:
            config = _config(tmp, stub, storage_url)
            # Two cold interpreters; on a loaded 2-core machine that can take minutes.
            with serving(config, tmp, "--workers", "2", pythonpath=[ROOT], timeout=300) as server:
                yield _Served(server.url, storage_url, server.process)
    finally:
        drop_schema(dsn, schema)


@asynccontextmanager
async def _pinned(
    url: str, *, to: int | None = None, not_to: int | None = None
) -> AsyncIterator[tuple[LangGraphClient, int]]:
    """A `langgraph_sdk` client on one keep-alive connection to one worker process.

    `to`: that worker's pid; `not_to`: any worker but that one.
    """
    for _ in range(_PIN_ATTEMPTS):
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=60)
        http = httpx.AsyncClient(base_url=url, timeout=60, limits=limits)
        pid = (await http.get("/health")).json()["worker_pid"]
        if (to is None or pid == to) and pid != not_to:
            try:
                yield LangGraphClient(http), pid
            finally:
                await http.aclose()
            return
        await http.aclose()
    pytest.fail(f"no connection reached the wanted worker (to={to}, not_to={not_to})")


@contextmanager
def _conflict() -> Iterator[None]:
    with pytest.raises(httpx.HTTPStatusError) as raised:
        yield
    assert raised.value.response.status_code == 409


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _last_text(values: Any) -> str:
    return str(values["messages"][-1]["content"])


async def _wait_status(client: LangGraphClient, thread_id: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        run: dict[str, Any] = dict(await client.runs.get(thread_id, run_id))
        if run["status"] not in ("pending", "running"):
            return run
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.05)


async def test_a_run_accepted_by_one_worker_is_driven_from_the_other(served: _Served) -> None:
    async with _pinned(served.url) as (a, pid_a), _pinned(served.url, not_to=pid_a) as (b, _):
        thread_id = (await a.threads.create())["thread_id"]
        first = await a.runs.create(thread_id, "agent", input=_say("hold first"))
        await asyncio.to_thread(_MODEL.wait_entered, "first")

        # B reads A's run from the database, and the thread's lease holds across processes.
        assert (await b.runs.get(thread_id, first["run_id"]))["status"] == "running"
        assert (await b.threads.get(thread_id))["status"] == "busy"
        with _conflict():
            await b.runs.wait(thread_id, "agent", input=_say("too early"))

        # B queues a run behind A's, then cancels A's run: it stops where it is, in A.
        queued = await b.runs.create(
            thread_id, "agent", input=_say("second"), multitask_strategy="enqueue"
        )
        assert queued["status"] == "pending"
        cancelled = await b.runs.cancel(thread_id, first["run_id"], wait=True)
        assert cancelled["status"] == "interrupted"
        _MODEL.release("first")

        # The queued run starts once the thread is free; B joins it, whoever runs it.
        values = await b.runs.join(thread_id, queued["run_id"])
        assert _last_text(values) == "answer to second"
        assert (await a.runs.get(thread_id, queued["run_id"]))["status"] == "success"
        assert (await a.runs.get(thread_id, first["run_id"]))["status"] == "interrupted"
        assert (await b.threads.get(thread_id))["status"] == "idle"


async def test_a_rollback_from_the_other_worker_undoes_the_run(served: _Served) -> None:
    async with _pinned(served.url) as (a, pid_a), _pinned(served.url, not_to=pid_a) as (b, _):
        thread_id = (await a.threads.create())["thread_id"]
        await a.runs.wait(thread_id, "agent", input=_say("kept"))
        run = await a.runs.create(thread_id, "agent", input=_say("hold undone"))
        await asyncio.to_thread(_MODEL.wait_entered, "undone")
        await b.runs.cancel(thread_id, run["run_id"], wait=True, action="rollback")
        _MODEL.release("undone")
        state = await b.threads.get_state(thread_id)
        assert [m["content"] for m in state["values"]["messages"]] == ["kept", "answer to kept"]
        assert (await b.threads.get(thread_id))["status"] == "idle"


async def test_a_join_stream_from_the_other_worker_ends_with_the_run(served: _Served) -> None:
    async with _pinned(served.url) as (a, pid_a), _pinned(served.url, not_to=pid_a) as (b, _):
        thread_id = (await a.threads.create())["thread_id"]
        run = await a.runs.create(thread_id, "agent", input=_say("hold streamed"))
        await asyncio.to_thread(_MODEL.wait_entered, "streamed")
        parts: list[Any] = []

        async def join() -> None:
            async for part in b.runs.join_stream(thread_id, run["run_id"]):
                parts.append(part)

        joining = asyncio.create_task(join())
        await asyncio.sleep(0.5)
        assert not joining.done()  # it waits for the run, in the other process
        _MODEL.release("streamed")
        await asyncio.wait_for(joining, 30)
        assert [p.event for p in parts][-1:] == ["end"]
        assert (await b.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_runs_wait_of_a_queued_run_answers_its_own_values(served: _Served) -> None:
    """The queued run may run in either worker; a later queued run may finish before the wait."""
    async with _pinned(served.url) as (a, pid_a), _pinned(served.url, not_to=pid_a) as (b, _):
        thread_id = (await a.threads.create())["thread_id"]
        await a.runs.create(thread_id, "agent", input=_say("hold gate"))
        await asyncio.to_thread(_MODEL.wait_entered, "gate")
        waiting = asyncio.create_task(
            b.runs.wait(thread_id, "agent", input=_say("two"), multitask_strategy="enqueue")
        )
        deadline = time.monotonic() + 30
        while len(await a.runs.list(thread_id)) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        third = await a.runs.create(
            thread_id, "agent", input=_say("three"), multitask_strategy="enqueue"
        )
        _MODEL.release("gate")
        values = await asyncio.wait_for(waiting, 60)
        assert _last_text(values) == "answer to two"
        await a.runs.join(thread_id, third["run_id"])
        history = [
            m["content"] for m in (await b.threads.get_state(thread_id))["values"]["messages"]
        ]
        assert history[-4:] == ["two", "answer to two", "three", "answer to three"]


async def test_a_killed_worker_s_thread_is_taken_over(served: _Served) -> None:
    async with _pinned(served.url) as (a, pid_a):
        thread_id = (await a.threads.create())["thread_id"]
        run = await a.runs.create(thread_id, "agent", input=_say("hold orphan"))
        await asyncio.to_thread(_MODEL.wait_entered, "orphan")
    os.kill(pid_a, signal.SIGKILL)
    _MODEL.release("orphan")
    async with _pinned(served.url, not_to=pid_a) as (b, _):
        # The dead worker's lease lapses 2-3 s after the kill (renewed every TTL / 3): 409
        # while it is live. A loaded machine may get here later; then the run just starts.
        try:
            await b.runs.wait(thread_id, "agent", input=_say("at once"))
            status = 200
        except httpx.HTTPStatusError as error:
            status = error.response.status_code
        live = "SELECT expires_at > clock_timestamp() FROM {s}.thread_locks WHERE thread_id = %s"
        assert status == 409 if served.query(live, thread_id)[0][0] else status in (200, 409)
        await asyncio.sleep(_LEASE_TTL + 0.5)
        dead = await b.runs.get(thread_id, run["run_id"])
        assert (dead["status"], dead["error"]) == ("error", "worker died during the run")
        values = await b.runs.wait(thread_id, "agent", input=_say("after"))
        assert _last_text(values) == "answer to after"
    # uvicorn's supervisor replaces the killed worker: two processes answer again.
    deadline = time.monotonic() + 300  # a cold interpreter, on a possibly busy machine
    pids: set[int] = set()
    while len(pids) < 2:
        assert time.monotonic() < deadline, pids
        async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
            pids.add((await http.get("/health")).json()["worker_pid"])
        await asyncio.sleep(0.1)
    assert pid_a not in pids


async def test_the_memory_outbox_is_applied_once_across_workers(served: _Served) -> None:
    names = ["Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances"]

    async def talk(name: str) -> None:
        async with _pinned(served.url) as (client, _):
            thread_id = (await client.threads.create())["thread_id"]
            await client.runs.wait(thread_id, "agent", input=_say(f"My name is {name}."))

    await asyncio.gather(*(talk(name) for name in names))
    deadline = time.monotonic() + 60
    while True:
        rows = served.query("SELECT status, attempts, lease_owner FROM {s}.memory_outbox")
        if rows and all(status == "done" for status, _, _ in rows):
            break
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.2)
    assert len(rows) >= len(names)
    # Applied at the first claim (no failed attempt, no lease lapsed and re-claimed).
    assert all(attempts == 0 for _, attempts, _ in rows), rows
    # Each statement became one fact (later names supersede earlier ones: one user, one slot).
    facts = served.query("SELECT body::jsonb ->> 'text', status FROM {s}.memory_facts")
    for name in names:
        assert sum(name in text for text, _ in facts) == 1, (name, facts)
    assert [status for _, status in facts].count("active") == 1, facts


async def test_a_worker_reads_what_the_other_just_wrote(served: _Served) -> None:
    async with _pinned(served.url) as (a, pid_a), _pinned(served.url, not_to=pid_a) as (b, _):
        thread_id = (await a.threads.create())["thread_id"]
        for turn in range(3):
            writer, reader = (a, b) if turn % 2 == 0 else (b, a)
            await writer.runs.wait(thread_id, "agent", input=_say(f"turn {turn}"))
            state = await reader.threads.get_state(thread_id)
            assert _last_text(state["values"]) == f"answer to turn {turn}"
        http_a, http_b = a.http.client, b.http.client
        before = (await http_b.get(f"/threads/{thread_id}/transcript")).json()["entries"]
        assert all(e["in_context"] for e in before)
        assert (await http_a.post(f"/threads/{thread_id}/compact", json={})).json()["compacted"]
        after = (await http_b.get(f"/threads/{thread_id}/transcript")).json()["entries"]
        head = (await a.threads.get_state(thread_id))["values"]["messages"]
        assert len(head) < len(before)  # the compaction removed messages
        kept = [e["message_id"] for e in after if e["kind"] == "message" and e["in_context"]]
        assert kept == [m["id"] for m in head]
