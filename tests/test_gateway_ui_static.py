"""The web page's static route: `/ui` and `/ui/{asset}` from package data.

Served from a fixed table built at import (no URL reaches the filesystem), with the strict
CSP, `nosniff` and `no-referrer` headers, public while every API route still needs the key,
and still behind the Host check and the cross-site refusal. The last tests read the shipped
JavaScript: no HTML sinks at all, and every module import resolves to a served asset.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from foldwise.bench._serve import open_app
from foldwise.gateway._ui import ASSETS, CONTENT_SECURITY_POLICY
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
KEYED = {**QUIET, "gateway": {"auth": {"api_keys": [{"key": "key-alice", "user": "alice"}]}}}
UI_DIR = Path(str(files("foldwise.gateway") / "ui"))
SCRIPTS = sorted(p for p in UI_DIR.rglob("*.js"))


async def raw_get(app: FastAPI, path: str, headers: dict[str, str] | None = None) -> int:
    """Status of a GET whose path reaches the app exactly as given (no URL normalisation)."""
    raw = path.encode()
    decoded = re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), path)
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": decoded,
        "raw_path": raw,
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"localhost"),
            *((k.encode(), v.encode()) for k, v in (headers or {}).items()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8420),
        "state": {},
    }
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def test_the_package_ships_the_page() -> None:
    # importlib.resources finds them, so an installed wheel serves the same files.
    for name in ("index.html", "app.js", "api.js", "style.css", "views/conversation.js"):
        assert name in ASSETS, name
    on_disk = {p.relative_to(UI_DIR).as_posix() for p in UI_DIR.rglob("*") if p.is_file()}
    assert on_disk == set(ASSETS), "every file of ui/ is served (and nothing else)"


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/index.html", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/views/threads.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ],
)
async def test_assets_have_their_type_and_the_security_headers(
    tmp_path: Path, path: str, content_type: str
) -> None:
    config = gateway_config(tmp_path, QUIET)
    async with open_app(config, scripted_factory(ScriptedChatModel())) as (c, _):
        r = await c.get(path)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == content_type
        assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "script-src 'self';" in CONTENT_SECURITY_POLICY
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
        name = path.removeprefix("/ui").lstrip("/") or "index.html"
        assert r.content == ASSETS[name].body
        again = await c.get(path, headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


async def test_unknown_names_and_traversal_are_404(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, QUIET)
    async with open_app(config, scripted_factory(ScriptedChatModel())) as (c, app):
        assert (await c.get("/ui/nope.js")).status_code == 404
        assert (await c.get("/ui/views")).status_code == 404
        assert await raw_get(app, "/ui/app.js") == 200  # the raw helper reaches the route
        assert await raw_get(app, "/ui/%61pp.js") == 200  # and decodes like a server
        for path in (
            "/ui/../pyproject.toml",
            "/ui/%2e%2e/pyproject.toml",
            "/ui/%2E%2E/%2E%2E/pyproject.toml",
            "/ui/..%2fpyproject.toml",
            "/ui/..%2f..%2f..%2fpyproject.toml",
            "/ui/views/../app.js",
            "/ui/./app.js",
            "/ui//etc/passwd",
            "/ui/%2fetc%2fpasswd",
            "/ui/..%5c..%5cpyproject.toml",
            "/ui/../_ui.py",
            "/ui/%2e%2e/_ui.py",
            "/ui/../__init__.py",
        ):
            assert await raw_get(app, path) == 404, path


async def test_the_page_is_public_while_the_api_needs_the_key(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, KEYED)
    async with open_app(config, scripted_factory(ScriptedChatModel())) as (c, _):
        for path in ("/ui", "/ui/app.js", "/ui/style.css", "/ui/views/memory.js"):
            assert (await c.get(path)).status_code == 200, path
        assert (await c.get("/ui/missing.js")).status_code == 404
        # Nothing else became public: the API still answers 401 without the key.
        assert (await c.post("/threads/search", json={})).status_code == 401
        assert (await c.get("/uix")).status_code == 401
        assert (await c.post("/ui", json={})).status_code == 405
        ok = await c.post("/threads/search", json={}, headers={"x-api-key": "key-alice"})
        assert ok.status_code == 200
        # The Host check and the cross-site refusal still apply to the page.
        foreign = await c.get("/ui", headers={"Host": "evil.example"})
        assert foreign.status_code == 400
        cross = await c.get("/ui/app.js", headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        same = await c.get("/ui/app.js", headers={"Origin": "http://testserver"})
        assert same.status_code == 200


HTML_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function\b"
    r"|createContextualFragment|DOMParser|srcdoc"
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(UI_DIR).as_posix())
def test_scripts_use_no_html_sinks(script: Path) -> None:
    # Untrusted text (messages, tool output, artifacts, memory) only ever becomes text nodes.
    source = script.read_text(encoding="utf-8")
    found = HTML_SINKS.findall(source)
    assert not found, f"{script.name} uses {found}: build elements and set textContent instead"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(UI_DIR).as_posix())
def test_module_imports_resolve_to_served_assets(script: Path) -> None:
    source = script.read_text(encoding="utf-8")
    for target in re.findall(r"""^import\s[^;]*?from\s+["']([^"']+)["'];""", source, re.M | re.S):
        assert target.startswith("."), f"{script.name} imports {target!r} (no bare or remote)"
        resolved = (script.parent / target).resolve().relative_to(UI_DIR.resolve()).as_posix()
        assert resolved in ASSETS, f"{script.name} imports {target!r}, which is not served"


def test_index_loads_only_local_assets_and_no_inline_code() -> None:
    html = ASSETS["index.html"].body.decode()
    assert "http://" not in html and "https://" not in html.replace("http://www.w3.org", "")
    for ref in re.findall(r"""(?:src|href)="([^"#]+)\"""", html):
        assert ref.startswith("/ui/") and ref.removeprefix("/ui/") in ASSETS, ref
    assert "style=" not in html, "inline styles are blocked by the CSP"
    assert re.search(r"\son[a-z]+=", html) is None, "inline handlers are blocked by the CSP"
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == [], "inline scripts are blocked"


def test_index_preloads_every_module() -> None:
    # No import waterfall before the first paint: each module is fetched in parallel.
    html = ASSETS["index.html"].body.decode()
    preloaded = set(re.findall(r'rel="modulepreload" href="/ui/([^"]+)"', html))
    assert preloaded == {name for name in ASSETS if name.endswith(".js")}


DIFF_CHECK = """
import { wordDiff } from %s;
const cases = JSON.parse(process.argv[1]);
const out = cases.map(([a, b]) => wordDiff(a, b));
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_word_diff_rebuilds_both_texts_and_is_minimal() -> None:
    cases = [
        ["the cat sat on the mat", "the dog sat on a mat today"],
        ["", "all new"],
        ["all gone", ""],
        ["same text", "same text"],
        ["line one\nline two\n", "line one\nline 2\nline three\n"],
        [" ".join(f"w{i}" for i in range(3000)), " ".join(f"w{i}" for i in range(3000) if i != 10)],
    ]
    script = DIFF_CHECK % json.dumps((UI_DIR / "diff.js").as_uri())
    run = subprocess.run(
        ["node", "--input-type=module", "-e", script, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = json.loads(run.stdout)
    for (before, after), runs in zip(cases, results, strict=True):
        assert "".join(r["text"] for r in runs if r["op"] != "ins") == before
        assert "".join(r["text"] for r in runs if r["op"] != "del") == after
    assert [r for r in results[0] if r["op"] != "same"] == [
        {"op": "del", "text": "cat"},
        {"op": "ins", "text": "dog"},
        {"op": "del", "text": "the"},
        {"op": "ins", "text": "a"},
        {"op": "ins", "text": " today"},
    ]
    assert [r["op"] for r in results[3]] == ["same"]
    # One word removed from 3,000: one deletion, not a rewrite of everything after it.
    assert [r for r in results[5] if r["op"] != "same"] == [{"op": "del", "text": "w10 "}]
