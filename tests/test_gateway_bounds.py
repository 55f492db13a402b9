"""Integers a database cannot bind are refused at the edge: 422 naming the field, never 500/503.

SQLite raises `OverflowError` past 2^63-1 and PostgreSQL refuses the query, so every integer of
a request (`offset`, `after_seq`, `limit`, in the query string or the body, and the values of a
checkpoint metadata filter) is range-checked before it reaches storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import drop_schema, gateway_config, postgres_url, scripted_factory, user

TOO_BIG = 2**63
LARGEST = 2**63 - 1

# (method, path, where the value goes, field, the field as named in `detail`)
FIELDS = [
    ("GET", "/threads/t/transcript", "query", "after_seq", "query.after_seq"),
    ("GET", "/threads/t/transcript", "query", "limit", "query.limit"),
    ("GET", "/threads/t/compactions", "query", "offset", "query.offset"),
    ("GET", "/threads/t/compactions", "query", "limit", "query.limit"),
    ("GET", "/threads/t/runs", "query", "offset", "query.offset"),
    ("GET", "/threads/t/runs", "query", "limit", "query.limit"),
    ("POST", "/threads/search", "body", "offset", "offset"),
    ("POST", "/threads/search", "body", "limit", "limit"),
    ("POST", "/threads/t/history", "body", "limit", "limit"),
]


async def _send(client: Any, method: str, path: str, where: str, values: dict[str, Any]) -> Any:
    if where == "query":
        return await client.request(method, path, params={k: str(v) for k, v in values.items()})
    return await client.request(method, path, json=values)


async def _check_bounds(client: Any) -> None:
    await client.post("/threads", json={"thread_id": "t"})
    r = await client.post(
        "/threads/t/runs/wait", json={"assistant_id": "agent", "input": user("x")}
    )
    assert r.status_code == 200, r.text
    for method, path, where, field, named in FIELDS:
        for value in (TOO_BIG, 2**64 + 5, -TOO_BIG - 1):
            r = await _send(client, method, path, where, {field: value})
            assert r.status_code == 422, (path, field, value, r.text)
            assert r.json()["detail"].startswith(f"{named}:"), r.text
    # The largest bindable offset is fine (an empty page), on both backends.
    for method, path, where, field, _named in FIELDS:
        if field != "limit":
            r = await _send(client, method, path, where, {field: LARGEST})
            assert r.status_code == 200, (path, field, r.text)
    r = await client.post("/threads/search", json={"ids": ["t"], "offset": TOO_BIG})
    assert r.status_code == 422 and r.json()["detail"].startswith("offset:")
    # A checkpoint metadata filter binds its values as SQL parameters.
    for value, named in ((TOO_BIG, "metadata.k"), ([1, -TOO_BIG - 1], "metadata.k[1]")):
        r = await client.post("/threads/t/history", json={"metadata": {"k": value}})
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith(f"{named}:"), r.text
    r = await client.post("/threads/t/history", json={"metadata": {"k": LARGEST}})
    assert r.status_code == 200 and r.json() == []
    # Everything in an input message is checkpointed: extras, content blocks, tool arguments.
    bad = {"role": "user", "content": "x", "additional_kwargs": {"n": 2**64 + 5}}
    r = await client.post(
        "/threads/t/runs/wait", json={"assistant_id": "agent", "input": {"messages": [bad]}}
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("input.messages[0].additional_kwargs.n:"), r.text


async def test_out_of_range_integers_are_422_on_sqlite(tmp_path: Path) -> None:
    factory = scripted_factory(ScriptedChatModel(default="ok"))
    async with open_app(gateway_config(tmp_path), factory) as (client, _):
        await _check_bounds(client)


@pytest.mark.postgres
async def test_out_of_range_integers_are_422_on_postgres(tmp_path: Path) -> None:
    url, dsn, schema = postgres_url()
    try:
        config = gateway_config(tmp_path, {"storage": {"url": url}})
        factory = scripted_factory(ScriptedChatModel(default="ok"))
        async with open_app(config, factory) as (client, _):
            await _check_bounds(client)
    finally:
        drop_schema(dsn, schema)
