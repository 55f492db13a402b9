"""Issue 16: what a finished run leaves to the garbage collector, and what the model is sent.

A run's state must be freed by reference counting when the run ends: a reference cycle
through it (the lease's loss watcher closing over the run) kept every finished run's decoded
history alive until a full collection, which then took ~100 ms in a gateway process. The
default agent must not stamp its assistant id on every answer: `langchain_openai` sends that
`name` back with each assistant message of every later request.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from foldwise.bench._openai_stub import OpenAIStub
from foldwise.bench._serve import open_app, stub_model_entry
from foldwise.gateway._active import ActiveRun
from tests.support.gateway import gateway_config, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


def _config(tmp_path: Path, stub: OpenAIStub) -> Any:
    models = [stub_model_entry(stub.url.removesuffix("/v1"), context_window=128000)]
    return gateway_config(tmp_path, {"models": models, **QUIET})


async def _turn(client: Any, thread: str, text: str) -> dict[str, Any]:
    response = await client.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(text)}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Automatic collection off (reference counting only), restored afterwards."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        gc.collect()


def _cyclic_garbage() -> list[Any]:
    """The objects only a collection would free (kept in `gc.garbage` to be looked at)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    gc.set_debug(0)
    return list(gc.garbage)


async def test_a_finished_run_is_freed_without_a_garbage_collection(
    tmp_path: Path, no_gc: None
) -> None:
    with OpenAIStub(["one", "two", "three"]) as stub:
        async with open_app(_config(tmp_path, stub)) as (client, _app):
            thread = (await client.post("/threads", json={})).json()["thread_id"]
            await _turn(client, thread, "hello")  # the first run also builds caches
            _cyclic_garbage()
            gc.garbage.clear()
            await _turn(client, thread, "again")
            await _turn(client, thread, "once more")
            garbage = _cyclic_garbage()
    runs = [o for o in garbage if isinstance(o, ActiveRun)]
    messages = [o for o in garbage if isinstance(o, BaseMessage)]
    assert runs == []
    assert messages == []


async def test_finished_runs_keep_no_copy_of_the_history(tmp_path: Path) -> None:
    """Only a queued run stays readable after its end; each would hold the whole history."""
    with OpenAIStub([f"answer {n}" for n in range(8)]) as stub:
        async with open_app(_config(tmp_path, stub)) as (client, app):
            thread = (await client.post("/threads", json={})).json()["thread_id"]
            for n in range(8):
                values = await _turn(client, thread, f"turn {n}")
            ids = {m["id"] for m in values["messages"]}
            gc.collect()
            alive = [o for o in gc.get_objects() if isinstance(o, BaseMessage) and o.id in ids]
            assert app.state.gateway.runs.recent == {}
    assert len(ids) == 16
    assert len(alive) <= 2 * len(ids)  # the token counter's copy, the last run's; not 8 runs'


async def test_a_released_lease_forgets_its_watchers(tmp_path: Path, no_gc: None) -> None:
    with OpenAIStub(["ok"]) as stub:
        async with open_app(_config(tmp_path, stub)) as (client, app):
            thread = (await client.post("/threads", json={})).json()["thread_id"]
            leases = app.state.gateway.leases

            class Operation:  # holds its lease, and its watcher closes over it: a cycle
                def __init__(self, lease: Any) -> None:
                    self.lease = lease
                    leases.watch(thread, "holder", lambda: print(self))

            Operation(await leases.acquire(thread, "holder", "run"))
            await leases.release(thread, "holder")
            garbage = _cyclic_garbage()
    assert [o for o in garbage if isinstance(o, Operation)] == []


async def test_the_default_agent_sends_no_name_with_its_answers(tmp_path: Path) -> None:
    with OpenAIStub(["first answer", "second answer"]) as stub:
        async with open_app(_config(tmp_path, stub)) as (client, _app):
            thread = (await client.post("/threads", json={})).json()["thread_id"]
            await _turn(client, thread, "hello")
            values = await _turn(client, thread, "again")
        sent = stub.requests[-1]["messages"]
    answers = [m for m in sent if m["role"] == "assistant"]
    assert [m["content"] for m in answers] == ["first answer"]
    assert all("name" not in m for m in answers)
    assert [m.get("name") for m in values["messages"] if m["type"] == "ai"] == [None, None]


async def test_create_app_can_freeze_the_objects_alive_at_start(tmp_path: Path) -> None:
    with OpenAIStub(["ok"]) as stub:
        try:
            before = gc.get_freeze_count()
            async with open_app(_config(tmp_path, stub), freeze_startup_objects=True) as (
                client,
                _app,
            ):
                assert gc.get_freeze_count() > before
                thread = (await client.post("/threads", json={})).json()["thread_id"]
                await _turn(client, thread, "hello")
        finally:
            gc.unfreeze()
