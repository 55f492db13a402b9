"""HTTP hygiene: body limits, JSON errors for every client mistake, health, the status map."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from foldwise.bench._serve import open_app
from foldwise.errors import (
    CompactionDisabledError,
    ConfigError,
    MessageFormatError,
    StorageError,
    SummaryGenerationError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from foldwise.gateway import status_for
from foldwise.gateway.storage import InvalidThreadIdError
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user

SMALL = {
    "gateway": {"max_body_bytes": 2000},
    "summarization": {"trigger": {"type": "messages", "value": 1000}},
}


async def test_bodies_over_the_limit_get_413_before_parsing(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="never")
    async with open_app(gateway_config(tmp_path, SMALL), scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "t"})
        big = {"assistant_id": "agent", "input": user("x" * 5000)}
        r = await c.post("/threads/t/runs/wait", json=big)
        assert r.status_code == 413
        assert r.json() == {
            "detail": "request body too large: the limit is 2000 bytes (gateway.max_body_bytes)"
        }

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}]}}'

        # No Content-Length (chunked): the bytes are counted as they arrive.
        r = await c.post(
            "/threads/t/runs/wait", content=chunks(), headers={"content-type": "application/json"}
        )
        assert r.status_code == 413 and "2000 bytes" in r.json()["detail"]
        # An unknown route with a big body is refused just the same, before any work.
        r = await c.post("/threads/unknown/compact", json=big)
        assert r.status_code == 413
        r = await c.post("/threads/t/runs/wait", content=b"{}", headers={"content-length": "abc"})
        assert r.status_code == 400
        assert model.requests == []
        small = await c.post(
            "/threads/t/runs/wait", json={"assistant_id": "agent", "input": user("ok")}
        )
        assert small.status_code == 200


@pytest.mark.parametrize(
    ("content", "status", "prefix"),
    [
        (b"{not json", 422, "body: invalid JSON"),
        (b"[]", 422, "body"),
        (b'"just a string"', 422, "body"),
        (b"[" * 50_000 + b"]" * 50_000, 400, "body: could not be parsed as JSON: it is nested"),
        (b'{"thread_id": "\xff\xfe"}', 400, "body: could not be parsed as JSON: it is not valid"),
        (b'{"metadata": {"k": "\\ud800"}}', 422, "metadata.k"),
        (b'{"metadata": {"k": [1, NaN]}}', 422, "metadata.k[1]: must be a finite number"),
        (b'{"metadata": {"k": Infinity}}', 422, "metadata.k"),
    ],
)
async def test_malformed_bodies_are_client_errors(
    tmp_path: Path, content: bytes, status: int, prefix: str
) -> None:
    async with open_app(gateway_config(tmp_path), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        r = await c.post("/threads", content=content, headers={"content-type": "application/json"})
        assert r.status_code == status, r.text
        assert r.json()["detail"].startswith(prefix)


async def test_unknown_routes_and_methods_answer_json(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        r = await c.get("/nowhere")
        assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
        r = await c.put("/threads/x/state", json={})
        assert r.status_code == 405 and "detail" in r.json()
        r = await c.get("/threads/t/transcript", params={"limit": 0})
        assert r.status_code == 422 and r.json()["detail"].startswith("query.limit")


async def test_health_reports_storage_and_assistants(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        r = await c.get("/health")
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "ok" and body["storage"] == "sqlite"
        assert body["schema_version"] >= 1 and body["assistants"] == ["agent"]


def test_every_foldwise_error_has_one_status() -> None:
    assert status_for(InvalidThreadIdError("..")) == 422
    assert status_for(MessageFormatError("bad", index=0, field="role")) == 422
    assert status_for(ConfigError("bad keep", key="keep")) == 422
    assert status_for(ThreadNotFoundError("t")) == 404
    assert status_for(ThreadBusyError("t")) == 409
    assert status_for(CompactionDisabledError("off")) == 409
    assert status_for(SummaryGenerationError("all failed")) == 502
    assert status_for(StorageError("db down")) == 503
    assert status_for(RuntimeError("bug")) == 500


def test_checkpoints_are_read_with_the_strict_type_allowlist() -> None:
    from dataclasses import dataclass

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from foldwise.gateway._checkpointer import safe_serializer

    @dataclass
    class Gadget:
        armed: bool = True

    # Written by a permissive serializer (or by whoever can write to the database)...
    payload = JsonPlusSerializer().dumps_typed(Gadget())
    restored = safe_serializer().loads_typed(payload)
    # ...an unlisted type is never reconstructed (no import, no constructor call).
    assert not isinstance(restored, Gadget) and restored == {"armed": True}
    message = HumanMessage("hi", id="m1")
    assert safe_serializer().loads_typed(safe_serializer().dumps_typed(message)) == message


async def test_run_records(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path), scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "r"})
        r = await c.post("/threads/r/runs/wait", json={"assistant_id": "agent", "input": user("x")})
        run_id = r.headers["content-location"].rsplit("/", 1)[1]
        run = (await c.get(f"/threads/r/runs/{run_id}")).json()
        assert run["run_id"] == run_id and run["status"] == "success" and run["kind"] == "run"
        assert (
            await c.get("/threads/r/runs/00000000-0000-0000-0000-000000000000")
        ).status_code == 404
        assert (await c.get("/threads/r/runs/bad%20id")).status_code == 422
        assert (await c.get(f"/threads/other/runs/{run_id}")).status_code == 404


async def test_health_is_503_when_the_database_is_gone(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path), scripted_factory(ScriptedChatModel())) as (
        c,
        app,
    ):
        await app.state.gateway.storage.aclose()
        r = await c.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "unavailable"
        r = await c.get("/threads/t")
        assert r.status_code == 503 and "get_thread" in r.json()["detail"]
