"""Gateway auth and tenant isolation: API keys, the authenticator hook, per-identity threads."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request

from foldwise.bench._serve import open_app
from foldwise.errors import ConfigError
from foldwise.gateway import create_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
KEYS = {
    "auth": {
        "api_keys": [{"key": "key-alice", "user": "alice"}, {"key": "$BOB_KEY", "user": "bob"}]
    }
}
ALICE = {"x-api-key": "key-alice"}
BOB = {"Authorization": "Bearer key-bob"}


def keyed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **extra: Any) -> Any:
    monkeypatch.setenv("BOB_KEY", "key-bob")
    return gateway_config(tmp_path, {**QUIET, "gateway": {**KEYS, **extra}})


async def test_identities_cannot_see_each_others_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage_url: str
) -> None:
    config = keyed_config(tmp_path, monkeypatch)
    config = config.model_copy(
        update={"storage": config.storage.model_copy(update={"url": storage_url})}
    )
    model = ScriptedChatModel(default="answer")
    async with open_app(config, scripted_factory(model)) as (c, _):
        made = await c.post("/threads", json={"thread_id": "a1"}, headers=ALICE)
        assert made.status_code == 200, made.text
        run = await c.post(
            "/threads/a1/runs/wait",
            json={"assistant_id": "agent", "input": user("hi")},
            headers=ALICE,
        )
        assert run.status_code == 200, run.text
        run_id = run.headers["content-location"].rsplit("/", 1)[1]
        compacted = await c.post("/threads/a1/compact", json={"force": True}, headers=ALICE)
        assert compacted.status_code == 200, compacted.text
        reads = [
            ("get", "/threads/a1", None),
            ("get", "/threads/a1/state", None),
            ("post", "/threads/a1/history", {}),
            ("get", "/threads/a1/runs", None),
            ("get", f"/threads/a1/runs/{run_id}", None),
            ("get", "/threads/a1/transcript", None),
            ("get", "/threads/a1/compactions", None),
            ("get", "/threads/a1/context", None),
        ]
        head = (await c.get("/threads/a1/state", headers=ALICE)).json()["checkpoint"]
        reads.append(("get", f"/threads/a1/state/{head['checkpoint_id']}", None))
        for method, path, body in reads:
            mine = await c.request(method, path, json=body, headers=ALICE)
            assert mine.status_code == 200, (path, mine.text)
            theirs = await c.request(method, path, json=body, headers=BOB)
            assert theirs.status_code == 404, (path, theirs.text)
            assert theirs.json() == {"detail": "thread 'a1' not found"}, path
            anonymous = await c.request(method, path, json=body)
            assert anonymous.status_code == 401, (path, anonymous.text)
        transcript = (await c.get("/threads/a1/transcript", headers=ALICE)).json()
        assert [e["message"]["content"] for e in transcript["entries"]][:2] == ["hi", "answer"]
        writes = [
            ("patch", "/threads/a1", {"metadata": {"x": 1}}),
            ("post", "/threads/a1/compact", {"force": True}),
            ("post", "/threads/a1/runs/wait", {"assistant_id": "agent", "input": user("x")}),
            ("post", "/threads/a1/runs/stream", {"assistant_id": "agent", "input": user("x")}),
            (
                "post",
                "/threads/a1/runs/wait",
                {"assistant_id": "agent", "input": user("x"), "if_not_exists": "create"},
            ),
            ("post", "/threads/a1/copy", None),
            (
                "post",
                "/threads/a1/state",
                {"values": {"messages": [{"role": "user", "content": "x"}]}},
            ),
            ("delete", "/threads/a1", None),
        ]
        for method, path, body in writes:
            theirs = await c.request(method, path, json=body, headers=BOB)
            assert theirs.status_code == 404, (path, theirs.text)
        # Bob's search never lists Alice's thread, by filter or by id; her thread is intact.
        assert (await c.post("/threads/search", json={}, headers=BOB)).json() == []
        assert (await c.post("/threads/count", json={}, headers=BOB)).json() == 0
        by_id = await c.post("/threads/search", json={"ids": ["a1"]}, headers=BOB)
        assert by_id.json() == []
        taken = await c.post(
            "/threads", json={"thread_id": "a1", "if_exists": "do_nothing"}, headers=BOB
        )
        assert taken.status_code == 409
        await c.post("/threads", json={"thread_id": "b1"}, headers=BOB)
        alice_sees = (await c.post("/threads/search", json={}, headers=ALICE)).json()
        assert [t["thread_id"] for t in alice_sees] == ["a1"]
        assert "x" not in alice_sees[0]["metadata"]
        state = (await c.get("/threads/a1/state", headers=ALICE)).json()
        assert len(state["values"]["messages"]) >= 2


async def test_keys_are_checked_and_public_paths_stay_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = keyed_config(tmp_path, monkeypatch)
    async with open_app(config, scripted_factory(ScriptedChatModel())) as (c, _):
        for headers in (
            {},
            {"x-api-key": "wrong"},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Basic key-alice"},
            {"x-api-key": "key-alic"},
        ):
            r = await c.post("/threads/search", json={}, headers=headers)
            assert r.status_code == 401, headers
            assert r.json()["detail"].startswith("authentication required")
            assert r.headers["www-authenticate"] == "Bearer"
        assert (await c.post("/threads/search", json={}, headers=ALICE)).status_code == 200
        assert (await c.post("/threads/search", json={}, headers=BOB)).status_code == 200
        for path in ("/health", "/ok", "/info"):
            assert (await c.get(path)).status_code == 200, path
    # Neither a right nor a wrong key ever reaches the log.
    assert not [r for r in caplog.records if "key-" in r.getMessage() or "wrong" in r.getMessage()]


async def test_no_auth_means_one_local_identity(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        await c.post("/threads", json={"thread_id": "t"})
        assert (await c.get("/threads/t")).status_code == 200
        listed = await c.post("/threads/search", json={}, headers={"x-api-key": "ignored"})
        assert [t["thread_id"] for t in listed.json()] == ["t"]


def header_user(request: Request) -> str | None:
    """A sync authenticator: the `x-user` header, unless it says `revoked` (403)."""
    name = request.headers.get("x-user")
    if name == "revoked":
        raise HTTPException(status_code=403, detail="token revoked")
    if name == "broken":
        raise RuntimeError("the identity provider is down for token SECRET-TOKEN")
    if name == "long":
        return "x" * 300
    return name


async def async_header_user(request: Request) -> str | None:
    """An async authenticator: the `x-user` header."""
    return request.headers.get("x-user") or None


@pytest.mark.parametrize("hook", ["header_user", "async_header_user"])
async def test_authenticator_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = keyed_config(
        tmp_path,
        monkeypatch,
        auth={
            "api_keys": [{"key": "key-alice", "user": "alice"}],
            "authenticator": f"tests.test_gateway_auth:{hook}",
        },
    )
    async with open_app(config, scripted_factory(ScriptedChatModel())) as (c, _):
        await c.post("/threads", json={"thread_id": "z"}, headers={"x-user": "zoe"})
        assert (await c.get("/threads/z", headers={"x-user": "zoe"})).status_code == 200
        assert (await c.get("/threads/z", headers={"x-user": "yan"})).status_code == 404
        assert (await c.get("/threads/z", headers=ALICE)).status_code == 404
        assert (await c.get("/threads/z")).status_code == 401
        if hook == "header_user":
            revoked = await c.get("/threads/z", headers={"x-user": "revoked"})
            assert revoked.status_code == 403 and revoked.json() == {"detail": "token revoked"}
            broken = await c.get("/threads/z", headers={"x-user": "broken"})
            assert broken.status_code == 401
            # An identity storage cannot hold fails closed (401), not 500 on every route.
            assert (
                await c.post("/threads", json={}, headers={"x-user": "long"})
            ).status_code == 401
        # Public, but with auth on it says nothing about other identities or the agents.
        health = (await c.get("/health")).json()
        assert health == {"status": "ok"}
    assert "SECRET-TOKEN" not in caplog.text  # the hook's error text may quote credentials


def test_auth_configuration_is_checked(tmp_path: Path) -> None:
    for auth, message in [
        ({"api_keys": [{"key": "", "user": "a"}]}, "must not be empty"),
        ({"api_keys": [{"key": "$UNSET_KEY", "user": "a"}]}, "required key is missing"),
        ({"api_keys": [{"key": "k", "user": "a"}, {"key": "k", "user": "b"}]}, "repeats"),
        ({"api_keys": [{"key": "k", "user": ""}]}, "gateway.auth.api_keys[0].user"),
        ({"authenticator": "no colon"}, "package.module:callable"),
    ]:
        with pytest.raises(ConfigError) as caught:
            gateway_config(tmp_path, {"gateway": {"auth": auth}})
        assert message in str(caught.value), (auth, str(caught.value))
        assert "k'" not in str(caught.value)  # no key value in the message
    config = gateway_config(tmp_path, {"gateway": {"auth": {"authenticator": "tests.nope:f"}}})
    with pytest.raises(ConfigError, match=r"tests\.nope"):
        create_app(config)
    secret = gateway_config(
        tmp_path, {"gateway": {"auth": {"api_keys": [{"key": "s3cr3t", "user": "a"}]}}}
    )
    assert "s3cr3t" not in repr(secret) and "s3cr3t" not in str(secret.model_dump())


async def test_migrated_threads_belong_to_the_local_identity(storage_url: str) -> None:
    from foldwise.gateway.storage import open_storage

    async with open_storage(storage_url) as storage:
        await storage.create_thread("old", {})
        await storage.create_thread("hers", {}, owner="alice")
        assert (await storage.get_thread("old")) is not None
        assert (await storage.get_thread("old", owner="")) is not None
        assert (await storage.get_thread("old", owner="alice")) is None
        assert (await storage.get_thread("hers", owner="alice")) is not None
        assert (await storage.get_thread("hers")).owner == "alice"  # type: ignore[union-attr]
        listed = await storage.search_threads(owner="alice")
        assert [t.thread_id for t in listed] == ["hers"]
        assert len(await storage.search_threads()) == 2
        assert await storage.schema_version() >= 4
