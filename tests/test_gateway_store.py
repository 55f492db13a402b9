"""The gateway's LangGraph store API: wire shapes, validation, and one tenant per identity."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from foldwise.bench._serve import open_app
from foldwise.gateway._tenancy import memory_user_id, store_tenant_label
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory

USERS = ("alice", "bob", "a_b", "aXb", "carol.smith@example.com")
HEADERS = {name: {"x-api-key": f"key-{index}"} for index, name in enumerate(USERS)}
ALICE, BOB = HEADERS["alice"], HEADERS["bob"]


@pytest.fixture
async def client(tmp_path: Path, storage_url: str) -> AsyncIterator[httpx.AsyncClient]:
    keys = [{"key": f"key-{index}", "user": name} for index, name in enumerate(USERS)]
    config = gateway_config(
        tmp_path, {"storage": {"url": storage_url}, "gateway": {"auth": {"api_keys": keys}}}
    )
    async with open_app(config, scripted_factory(ScriptedChatModel(default="ok"))) as (c, _):
        yield c


async def put(
    c: httpx.AsyncClient, headers: Any, namespace: list[str], key: str, **value: Any
) -> None:
    done = await c.put(
        "/store/items", json={"namespace": namespace, "key": key, "value": value}, headers=headers
    )
    assert done.status_code == 204, done.text


async def get(c: httpx.AsyncClient, headers: Any, namespace: list[str], key: str) -> Any:
    found = await c.get(
        "/store/items", params={"namespace": ".".join(namespace), "key": key}, headers=headers
    )
    assert found.status_code == 200, found.text
    return found.json()


async def search(c: httpx.AsyncClient, headers: Any, **body: Any) -> list[dict[str, Any]]:
    found = await c.post("/store/items/search", json=body, headers=headers)
    assert found.status_code == 200, found.text
    items: list[dict[str, Any]] = found.json()["items"]
    return items


async def namespaces(c: httpx.AsyncClient, headers: Any, **body: Any) -> list[list[str]]:
    found = await c.post("/store/namespaces", json=body, headers=headers)
    assert found.status_code == 200, found.text
    listed: list[list[str]] = found.json()["namespaces"]
    return listed


async def test_items_round_trip_in_langgraph_shapes(client: httpx.AsyncClient) -> None:
    await put(client, ALICE, ["docs", "reports"], "r1", title="Q1", pages=3)
    item = await get(client, ALICE, ["docs", "reports"], "r1")
    assert set(item) == {"namespace", "key", "value", "created_at", "updated_at"}
    assert item["namespace"] == ["docs", "reports"]
    assert item["value"] == {"title": "Q1", "pages": 3}
    for stamp in ("created_at", "updated_at"):
        moment = datetime.fromisoformat(item[stamp])
        assert moment.tzinfo is not None and abs(moment - datetime.now(UTC)) < timedelta(hours=1)
    await put(client, ALICE, ["docs", "reports"], "r1", title="Q1 (v2)")
    assert (await get(client, ALICE, ["docs", "reports"], "r1"))["value"] == {"title": "Q1 (v2)"}
    assert await get(client, ALICE, ["docs", "reports"], "missing") is None
    deleted = await client.request(
        "DELETE",
        "/store/items",
        json={"namespace": ["docs", "reports"], "key": "r1"},
        headers=ALICE,
    )
    assert deleted.status_code == 204, deleted.text
    assert await get(client, ALICE, ["docs", "reports"], "r1") is None


async def test_search_filters_pages_and_scopes_by_prefix(client: httpx.AsyncClient) -> None:
    for index in range(5):
        await put(client, ALICE, ["notes", f"n{index % 2}"], f"k{index}", n=index, tag="t")
    await put(client, ALICE, ["notesx"], "other", n=99, tag="t")
    under = await search(client, ALICE, namespace_prefix=["notes"], limit=10)
    assert sorted(i["key"] for i in under) == ["k0", "k1", "k2", "k3", "k4"]
    assert all(i["namespace"][0] == "notes" and "score" in i for i in under)
    big = await search(client, ALICE, namespace_prefix=["notes"], filter={"n": {"$gte": 3}})
    assert sorted(i["key"] for i in big) == ["k3", "k4"]
    exact = await search(client, ALICE, namespace_prefix=[], filter={"n": 99})
    assert [i["key"] for i in exact] == ["other"]
    first = await search(client, ALICE, namespace_prefix=["notes"], limit=2, offset=0)
    rest = await search(client, ALICE, namespace_prefix=["notes"], limit=10, offset=2)
    assert len(first) == 2 and len(rest) == 3
    assert {i["key"] for i in first} | {i["key"] for i in rest} == {f"k{i}" for i in range(5)}


async def test_namespaces_prefix_suffix_and_depth(client: httpx.AsyncClient) -> None:
    await put(client, ALICE, ["a", "b", "c"], "k", v=1)
    await put(client, ALICE, ["a", "d"], "k", v=1)
    await put(client, ALICE, ["x", "c"], "k", v=1)
    assert sorted(await namespaces(client, ALICE)) == [["a", "b", "c"], ["a", "d"], ["x", "c"]]
    assert sorted(await namespaces(client, ALICE, prefix=["a"])) == [["a", "b", "c"], ["a", "d"]]
    assert sorted(await namespaces(client, ALICE, suffix=["c"])) == [["a", "b", "c"], ["x", "c"]]
    assert sorted(await namespaces(client, ALICE, max_depth=1)) == [["a"], ["x"]]
    assert sorted(await namespaces(client, ALICE, prefix=["*", "c"])) == [["x", "c"]]
    assert len(await namespaces(client, ALICE, limit=1, offset=2)) == 1


async def test_identities_never_see_each_others_items(client: httpx.AsyncClient) -> None:
    for name, headers in HEADERS.items():
        await put(client, headers, ["shared", "space"], "same-key", owner=name)
    for name, headers in HEADERS.items():
        item = await get(client, headers, ["shared", "space"], "same-key")
        assert item["value"] == {"owner": name}, name
        found = await search(client, headers, namespace_prefix=[])
        assert [i["value"]["owner"] for i in found] == [name], name
        assert await namespaces(client, headers) == [["shared", "space"]], name
    await put(client, ALICE, ["alice", "private"], "secret", v="alice's")
    assert await get(client, BOB, ["alice", "private"], "secret") is None
    assert await search(client, BOB, namespace_prefix=["alice"]) == []
    assert await namespaces(client, BOB, prefix=["alice"]) == []
    assert await namespaces(client, BOB, suffix=["private"]) == []
    # Bob deleting the same namespace and key removes nothing of Alice's.
    gone = await client.request(
        "DELETE",
        "/store/items",
        json={"namespace": ["alice", "private"], "key": "secret"},
        headers=BOB,
    )
    assert gone.status_code == 204
    assert (await get(client, ALICE, ["alice", "private"], "secret"))["value"] == {"v": "alice's"}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("put", "/store/items", {"namespace": ["a"], "key": "k", "value": {}}),
        ("get", "/store/items?namespace=a&key=k", None),
        ("delete", "/store/items", {"namespace": ["a"], "key": "k"}),
        ("post", "/store/items/search", {"namespace_prefix": []}),
        ("post", "/store/namespaces", {}),
    ],
)
async def test_store_routes_need_credentials(
    client: httpx.AsyncClient, method: str, path: str, body: Any
) -> None:
    answer = await client.request(method, path, json=body)
    assert answer.status_code == 401, answer.text


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("put", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, "namespace[0]"),
        ("put", "/store/items", {"namespace": ["a", ""], "key": "k", "value": {}}, "namespace[1]"),
        ("put", "/store/items", {"namespace": [], "key": "k", "value": {}}, "namespace"),
        ("put", "/store/items", {"namespace": ["a", 3], "key": "k", "value": {}}, "namespace[1]"),
        ("put", "/store/items", {"namespace": ["a"] * 17, "key": "k", "value": {}}, "namespace"),
        (
            "put",
            "/store/items",
            {"namespace": ["foldwise_tenant:bob"], "key": "k", "value": {}},
            "namespace[0]",
        ),
        ("put", "/store/items", {"namespace": ["a"], "key": "", "value": {}}, "key"),
        ("put", "/store/items", {"namespace": ["a"], "key": "k", "value": [1]}, "value"),
        ("put", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}, "ttl"),
        ("get", "/store/items?namespace=&key=k", None, "namespace[0]"),
        ("get", "/store/items?namespace=a..b&key=k", None, "namespace[1]"),
        ("get", "/store/items?namespace=a", None, "query.key"),
        ("post", "/store/items/search", {"namespace_prefix": ["a"], "limit": 0}, "limit"),
        ("post", "/store/items/search", {"filter": {"a'); --": 1}}, "filter"),
        ("post", "/store/items/search", {"filter": {"n": {"$regex": "x"}}}, "filter.n"),
        ("post", "/store/items/search", {"filter": {"n": 2**70}}, "filter.n"),
        ("post", "/store/namespaces", {"suffix": ["*", "c"]}, "suffix[0]"),
        ("post", "/store/namespaces", {"max_depth": 0}, "max_depth"),
        ("post", "/store/namespaces", {"prefix": ["x.y"]}, "prefix[0]"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    client: httpx.AsyncClient, method: str, path: str, body: Any, field: str
) -> None:
    answer = await client.request(method, path, json=body, headers=ALICE)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith(f"{field}:"), answer.text
    assert await namespaces(client, ALICE) == []


def test_tenant_labels_are_one_to_one() -> None:
    labels = {name: store_tenant_label(name) for name in ("alice", "a.b", "", "x y", "sha256-00")}
    assert labels["alice"] == "foldwise_tenant:alice"
    assert labels[""] == "foldwise_tenant:"
    assert "." not in labels["a.b"] and labels["a.b"].startswith("foldwise_tenant:sha256-")
    assert labels["sha256-00"] != "foldwise_tenant:sha256-00"
    assert len(set(labels.values())) == len(labels)
    assert memory_user_id("") == "default"
    assert memory_user_id("carol.smith@example.com") == "carol.smith@example.com"
    assert memory_user_id("Carol Smith").startswith("sha256-")


async def test_a_locked_database_is_a_503_and_the_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    keys = [{"key": "key-0", "user": "alice"}]
    config = gateway_config(
        tmp_path, {"storage": {"url": f"sqlite:///{path}"}, "gateway": {"auth": {"api_keys": keys}}}
    )
    async with open_app(config, scripted_factory(ScriptedChatModel(default="ok"))) as (c, _):
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")  # another process holds the writer lock
            body = {"namespace": ["a"], "key": "k", "value": {"v": 1}}
            refused = await c.put("/store/items", json=body, headers=ALICE)
            assert refused.status_code == 503, refused.text
            assert refused.json() == {"detail": "the store could not write the item; retry shortly"}
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await put(c, ALICE, ["a"], "k", v=2)
        assert (await get(c, ALICE, ["a"], "k"))["value"] == {"v": 2}
