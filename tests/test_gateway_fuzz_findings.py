"""What the fuzzing area (`foldwise bench reliability --area fuzz`) found, pinned: each request
below answered 500 or 503 (or a 4xx that did not name the field) before its fix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import foldwise
from foldwise.bench._serve import open_app
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, user


def _factory(request: AgentRequest) -> HostedAgent:
    model = ScriptedChatModel(default="ok")
    graph = foldwise.create_agent(
        request.config, model=model, checkpointer=request.checkpointer, memory_worker=False
    )
    return HostedAgent(graph)


@pytest.fixture
async def client(tmp_path: Path, storage_url: str) -> AsyncIterator[httpx.AsyncClient]:
    config = gateway_config(
        tmp_path, {"storage": {"url": storage_url}, "memory": {"enabled": True}}
    )
    async with open_app(config, _factory) as (c, _app):
        made = await c.post("/threads", json={"thread_id": "t"})
        assert made.status_code == 200, made.text
        ran = await c.post(
            "/threads/t/runs/wait", json={"assistant_id": "agent", "input": user("hi")}
        )
        assert ran.status_code == 200, ran.text
        yield c


def _refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"], response.text


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**40])
async def test_store_value_past_64_bits_is_422(client: httpx.AsyncClient, value: int) -> None:
    # Was 500 (orjson: "Integer exceeds 64-bit range").
    body = {"namespace": ["n"], "key": "k", "value": {"deep": [{"n": value}]}}
    _refused(await client.put("/store/items", json=body), "value.deep[0].n")


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", '"a\\u0000b"'])
async def test_store_value_nan_or_nul_is_422(client: httpx.AsyncClient, raw: str) -> None:
    # Was 503 on PostgreSQL (jsonb holds neither NaN nor NUL).
    body = '{"namespace": ["n"], "key": "k", "value": {"v": RAW}}'.replace("RAW", raw)
    response = await client.put(
        "/store/items", content=body, headers={"content-type": "application/json"}
    )
    _refused(response, "value.v")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"namespace": ["n"], "key": "\\ud800", "value": {}}', "key"),
        ('{"namespace": ["\\udfff"], "key": "k", "value": {}}', "namespace[0]"),
    ],
)
async def test_store_lone_surrogate_key_or_label_is_422(
    client: httpx.AsyncClient, body: str, field: str
) -> None:
    # Was 500 (UnicodeEncodeError in the store's driver).
    headers = {"content-type": "application/json"}
    _refused(await client.put("/store/items", content=body, headers=headers), field)


async def test_store_search_filter_nan_is_422(client: httpx.AsyncClient) -> None:
    body = '{"filter": {"v": NaN}}'
    headers = {"content-type": "application/json"}
    _refused(await client.post("/store/items/search", content=body, headers=headers), "filter")


@pytest.mark.parametrize("field", ["query", "thread_id"])
async def test_overview_nul_is_422(client: httpx.AsyncClient, field: str) -> None:
    # Was 503 on PostgreSQL ("text fields cannot contain NUL"), the driver's class in the body.
    _refused(await client.post("/threads/overview", json={field: "a\x00b"}), field)


@pytest.mark.parametrize("checkpoint", ["%00", "a%00b"])
async def test_state_at_checkpoint_with_nul_is_422(
    client: httpx.AsyncClient, checkpoint: str
) -> None:
    # Was 500 on PostgreSQL.
    _refused(await client.get(f"/threads/t/state/{checkpoint}"), "checkpoint_id")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"before": "\\ud800"}', "before"),
        ('{"before": {"checkpoint_id": "a\\u0000"}}', "before.checkpoint_id"),
        ('{"checkpoint": {"checkpoint_id": "\\ud800"}}', "checkpoint.checkpoint_id"),
    ],
)
async def test_history_checkpoint_ids_are_checked(
    client: httpx.AsyncClient, body: str, field: str
) -> None:
    # `before` with a lone surrogate was 500.
    headers = {"content-type": "application/json"}
    _refused(await client.post("/threads/t/history", content=body, headers=headers), field)


async def test_run_from_checkpoint_with_nul_is_422(client: httpx.AsyncClient) -> None:
    body = {"assistant_id": "agent", "input": user("x"), "checkpoint_id": "a\x00b"}
    _refused(await client.post("/threads/t/runs/wait", json=body), "checkpoint_id")


@pytest.mark.parametrize("revision", [2**63, 2**64])
async def test_fact_revision_past_64_bits_is_422(client: httpx.AsyncClient, revision: int) -> None:
    # Was a 409 whose detail did not name the field (a revision no database column holds).
    fact = (await client.post("/memory/facts", json={"text": "I like tea"})).json()
    body: dict[str, Any] = {"text": "I like coffee", "expected_revision": revision}
    _refused(await client.patch(f"/memory/facts/{fact['id']}", json=body), "expected_revision")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"limit": ' + b"9" * 5000 + b"}", "a number in it has too many digits"),
        (b'{"metadata": ' + b"[" * 20000 + b"]" * 20000 + b"}", "it is nested too deeply"),
    ],
)
async def test_unparseable_body_names_the_body(
    client: httpx.AsyncClient, body: bytes, why: str
) -> None:
    # Was 400 "There was an error parsing the body" (no field, no reason).
    headers = {"content-type": "application/json"}
    response = await client.post("/threads/search", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["detail"] == f"body: could not be parsed as JSON: {why}"
