"""What browsers and web clients need: CORS, Host validation, JSON as text/plain, /info, /ok."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foldwise.bench._serve import open_app
from foldwise.cli._serve import _warn_if_open
from foldwise.gateway._http import HostMiddleware, host_name
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
UI = "http://localhost:3000"
PREFLIGHT = {
    "Origin": UI,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-api-key",
}


async def test_cors_preflight_for_a_configured_origin(tmp_path: Path) -> None:
    data = {
        **QUIET,
        "gateway": {"cors_origins": [UI], "auth": {"api_keys": [{"key": "k", "user": "u"}]}},
    }
    async with open_app(gateway_config(tmp_path, data), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        pre = await c.options("/threads/search", headers=PREFLIGHT)
        assert pre.status_code == 200, pre.text  # no key needed for a preflight
        assert pre.headers["access-control-allow-origin"] == UI
        assert "POST" in pre.headers["access-control-allow-methods"]
        assert "x-api-key" in pre.headers["access-control-allow-headers"].lower()
        ok = await c.post("/threads", json={}, headers={"Origin": UI, "x-api-key": "k"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == UI
        exposed = ok.headers["access-control-expose-headers"]
        assert "Content-Location" in exposed and "X-Pagination-Total" in exposed
        # A 401 carries the CORS headers too, so the browser can show why.
        denied = await c.post("/threads/search", json={}, headers={"Origin": UI})
        assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == UI
        other = await c.options(
            "/threads/search", headers={**PREFLIGHT, "Origin": "http://evil.example"}
        )
        assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


async def test_cors_is_off_by_default(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        pre = await c.options("/threads/search", headers=PREFLIGHT)
        assert pre.status_code == 403
        assert "access-control-allow-origin" not in pre.headers
        # Without CORS a browser page is another site: refused before any route runs.
        r = await c.post("/threads/search", json={}, headers={"Origin": UI})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        assert "gateway.cors_origins" in r.json()["detail"]


async def test_cross_site_browser_requests_are_refused(tmp_path: Path) -> None:
    """CORS does not stop a form or text/plain POST from another site; this does."""
    async with open_app(
        gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel(default="ran"))
    ) as (c, _):
        evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
        body = json.dumps(
            {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "x"}]}}
        )
        for path in ("/runs/wait", "/threads", "/threads/search"):
            r = await c.post(path, content=body, headers=evil)
            assert r.status_code == 403, (path, r.text)
        marked = await c.post("/threads", json={}, headers={"Sec-Fetch-Site": "cross-site"})
        assert marked.status_code == 403
        for origin in ("null",):
            assert (
                await c.post("/threads", json={}, headers={"Origin": origin})
            ).status_code == 403
        # The SDKs and server-side passthroughs send no Origin; the gateway's own pages do.
        assert (await c.post("/threads", json={})).status_code == 200
        same = await c.post("/threads", json={}, headers={"Origin": "http://testserver"})
        assert same.status_code == 200, same.text


async def test_host_header_is_validated(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        await c.post("/threads", json={"thread_id": "t"})
        evil = await c.post("/threads/search", json={}, headers={"Host": "evil.example"})
        assert evil.status_code == 400
        assert evil.json() == {
            "detail": "invalid Host header 'evil.example': add it to gateway.allowed_hosts"
        }
        assert (await c.get("/threads/t", headers={"Host": "evil.example:8420"})).status_code == 400
        forged = await c.get("/threads/t", headers={"Host": "[::1].evil.example"})
        assert forged.status_code == 400, forged.text
        for host in ("localhost:8420", "127.0.0.1", "[::1]:8420", "LOCALHOST"):
            r = await c.post("/threads/search", json={}, headers={"Host": host})
            assert r.status_code == 200 and r.json()[0]["thread_id"] == "t", host


async def test_allowed_hosts_configured(tmp_path: Path) -> None:
    data = {**QUIET, "gateway": {"allowed_hosts": ["api.example.com", "*.corp.example"]}}
    async with open_app(gateway_config(tmp_path, data), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        for host, status in [
            ("api.example.com", 200),
            ("api.example.com:443", 200),
            ("a.b.corp.example", 200),
            ("corp.example", 400),
            ("localhost", 400),
            ("evil.example", 400),
        ]:
            r = await c.get("/ok", headers={"Host": host})
            assert r.status_code == status, host
    data = {**QUIET, "gateway": {"allowed_hosts": ["*"]}}
    async with open_app(gateway_config(tmp_path, data), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        assert (await c.get("/ok", headers={"Host": "anything.example"})).status_code == 200


def test_host_matching() -> None:
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("[::1]:8420") == "::1" and host_name("::1") == "::1"
    # Was: everything after the closing bracket was dropped, so a rebinding name such as
    # `[::1].evil.example` read as the loopback `::1` and was let in.
    for forged in ("[::1].evil.example", "[::1]evil", "[::1]:80.evil.example", "[::1]:"):
        assert host_name(forged) == forged
    config = gateway_config(Path("."), {"gateway": {"host": "0.0.0.0"}}).gateway
    hosts = HostMiddleware(lambda *a: None, config=config)  # type: ignore[arg-type,return-value]
    assert hosts.allows("localhost", None) and not hosts.allows("0.0.0.0", None)
    # The address a client connected to is accepted: a rebinding page cannot produce it.
    assert hosts.allows("192.168.1.5", "192.168.1.5")
    assert not hosts.allows("evil.example", "192.168.1.5") and not hosts.allows("", None)


async def test_json_body_sent_as_text_plain(tmp_path: Path) -> None:
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        body = json.dumps({"thread_id": "plain", "metadata": {"via": "next"}})
        r = await c.post(
            "/threads", content=body, headers={"Content-Type": "text/plain;charset=UTF-8"}
        )
        assert r.status_code == 200, r.text
        assert r.json()["metadata"] == {"via": "next"}
        bad = await c.post("/threads", content="not json", headers={"Content-Type": "text/plain"})
        assert bad.status_code == 422 and "detail" in bad.json()


async def test_info_and_ok(tmp_path: Path) -> None:
    from foldwise import __version__

    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(ScriptedChatModel())) as (
        c,
        _,
    ):
        assert (await c.get("/ok")).json() == {"ok": True}
        info = (await c.get("/info")).json()
        assert info["version"] == __version__
        assert info["flags"]["assistants"] is True and info["flags"]["crons"] is False


@pytest.mark.parametrize(
    ("host", "auth", "warned"),
    [
        ("0.0.0.0", False, True),
        ("192.168.1.5", False, True),
        ("myhost.lan", False, True),
        ("0.0.0.0", True, False),
        ("127.0.0.1", False, False),
        ("::1", False, False),
        ("localhost", False, False),
    ],
)
def test_serve_warns_when_bound_off_loopback_without_auth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, auth: bool, warned: bool
) -> None:
    data = {"gateway": {"auth": {"api_keys": [{"key": "k", "user": "u"}]}}} if auth else {}
    _warn_if_open(gateway_config(tmp_path, data), host)
    err = capsys.readouterr().err
    assert ("without gateway.auth" in err) is warned, err
