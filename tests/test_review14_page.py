"""Review 14: the web page in Chromium against an in-process gateway (uvicorn on a free port).

Repros: XSS payloads in every text the page shows; `/compact keep=0`; how many requests an
idle page makes per minute with 50 threads (timers fast-forwarded); whether switching
threads leaves pollers behind.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from foldwise.bench._serve import free_port
from foldwise.gateway import create_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() or shutil.which("node") is None, reason="no /usr/bin/chromium"
)
XSS = (
    '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    "\"'><svg onload=window.__xss=3>"
)


@tool
def leak(query: str) -> str:
    """Return a long listing that carries markup."""
    return "\n".join(f"row {i} {XSS} javascript:window.__xss=4" for i in range(400))


def _respond(messages: list[BaseMessage]) -> Any:
    if is_summarizer_call(messages):
        return f"SUMMARY {XSS}"
    last = messages[-1]
    if isinstance(last, HumanMessage) and "use tool" in str(last.content):
        return AIMessage(
            content=XSS,
            tool_calls=[
                {
                    "name": "leak",
                    "args": {"query": XSS},
                    "id": f"c{time.time_ns()}",
                    "type": "tool_call",
                }
            ],
        )
    return f"echo {XSS}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    tmp = tmp_path_factory.mktemp("r14page")
    config = gateway_config(
        tmp,
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 8},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "none"},
            },
            "offload": {"tool_token_limit": 800, "preview_chars": 200},
        },
    )
    model = ScriptedChatModel(default=_respond, usage=True)
    app = create_app(config, agent_factory=scripted_factory(model, tools=[leak]))
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.05)
    with httpx.Client(base_url=base, timeout=60) as c:
        c.post("/threads", json={"thread_id": "x", "metadata": {"note": XSS}}).raise_for_status()
        for text in ("use tool please", XSS, "a", "b", "c", "d"):
            r = c.post(
                "/threads/x/runs/wait",
                json={
                    "assistant_id": "agent",
                    "input": {"messages": [{"type": "human", "content": text}]},
                },
            )
            assert r.status_code == 200, r.text
        for i in range(49):
            c.post("/threads", json={"thread_id": f"n{i:02d}"}).raise_for_status()
    yield base
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


def _page(browser: Any, base: str) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requests.append(f"{r.method} {r.url.removeprefix(base)}"))
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"pageerror {e}"))
    return page, requests, problems


def test_markup_in_messages_tools_artifacts_and_summaries_stays_text(
    browser: Any, server: str
) -> None:
    page, _, problems = _page(browser, server)
    page.goto(f"{server}/ui#/t/x")
    page.wait_for_selector("[data-testid=message]")
    for hash_ in ("#/t/x", "#/t/x/context", "#/t/x/artifacts"):
        page.evaluate(f"location.hash = {json.dumps(hash_)}")
        page.wait_for_timeout(600)
    page.locator("[data-testid=artifact-item] a.artifact-link").first.click()
    page.wait_for_selector("[data-testid=artifact-rows] .row")
    page.fill("[data-testid=artifact-search-input]", "__xss")
    page.click("[data-testid=artifact-search-submit]")
    page.wait_for_selector("[data-testid=artifact-match]")
    page.evaluate("location.hash = '#/t/x'")
    page.wait_for_selector("[data-testid=compaction-marker]")
    page.locator("[data-testid=compaction-marker]").first.click()
    page.wait_for_timeout(500)
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src=x], svg[onload], script:not([src])").count() == 0
    assert page.get_by_text("window.__xss=1", exact=False).count() > 0  # shown as text
    assert problems == []
    page.close()


def test_compact_keep_zero_is_refused_or_sent_as_zero(browser: Any, server: str) -> None:
    page, _, _ = _page(browser, server)
    bodies: list[Any] = []
    page.on(
        "request", lambda r: bodies.append(r.post_data_json) if r.url.endswith("/compact") else None
    )
    page.goto(f"{server}/ui#/t/n00")
    page.wait_for_selector("[data-testid=composer-input]")
    page.fill("[data-testid=composer-input]", "/compact keep=0")
    page.press("[data-testid=composer-input]", "Enter")
    page.wait_for_timeout(800)
    notice = page.locator("[data-testid=composer-notice]")
    refused = notice.is_visible() and "Usage" in notice.inner_text()
    assert refused or bodies == [{"keep": {"type": "messages", "value": 0}}], bodies
    page.close()


def _idle_requests(page: Any, minutes: int) -> int:
    """Requests while the page's timers run `minutes` of (fake) time, in 1 s steps."""
    count = [0]
    page.on("request", lambda r: count.__setitem__(0, count[0] + 1))
    for _ in range(60 * minutes):
        page.clock.run_for(1000)
        page.wait_for_timeout(15)  # let the fetches started by the timers settle
    return count[0]


def test_idle_page_request_rate_and_thread_switching(browser: Any, server: str) -> None:
    page, requests, _ = _page(browser, server)
    page.clock.install()
    page.goto(f"{server}/ui#/t/x")
    page.wait_for_selector("[data-testid=message]")
    page.wait_for_timeout(500)
    idle = _idle_requests(page, 2) / 2
    for i in range(20):  # open 20 threads, one after another
        page.evaluate(f"location.hash = '#/t/n{i:02d}'")
        page.wait_for_timeout(150)
    page.evaluate("location.hash = '#/t/x'")
    page.wait_for_timeout(500)
    after = _idle_requests(page, 2) / 2
    print(f"\nidle page, 50 threads: {idle:.0f} requests/min; after 20 switches: {after:.0f}/min")
    overview = [r for r in requests if r.startswith("POST /threads/overview")]
    print(f"overview calls in total: {len(overview)}")
    assert after <= idle + 2
    page.close()
