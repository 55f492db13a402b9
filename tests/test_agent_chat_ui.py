"""agent-chat-ui, unchanged, in Chromium against `foldwise serve` (Playwright).

The UI is the Vite front end shipped in the pinned npm package `create-agent-chat-app` 0.1.6
(see `tests.support.agent_chat_ui`), built with its own config and served from a loopback
port; the gateway is a `foldwise serve` subprocess (ChatOpenAI on the OpenAI stub) whose
`gateway.cors_origins` lists the UI's origin. Playwright drives Debian's Chromium at
`/usr/bin/chromium` (never a downloaded browser). The scenarios run in order on one page:
three messages in a thread, a reload, regenerate, an edit that forks, stop during a slow reply,
a second thread from "New thread" and the history sidebar. Each asserts what the page shows
and, where it matters, what the gateway stored. Screenshots go to `docs/img/agent-chat-ui-*.png`
when ``FOLDWISE_WRITE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest
import yaml
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright

from foldwise.bench._serve import serving
from tests.support import OpenAIStub
from tests.support.agent_chat_ui import (
    ASSISTANT_ID,
    CHROMIUM,
    build_ui,
    missing_requirement,
    serve_static,
)
from tests.test_serve_e2e import write_config

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "img"
# Read at import: the suite's autouse fixture hides FOLDWISE_* variables from the tests.
WRITE_SCREENSHOTS = os.environ.get("FOLDWISE_WRITE_SCREENSHOTS") == "1"
SLOW_ANSWER = "This slow answer is streamed one small piece at a time. " * 6
TIMEOUT_MS = 20_000
FIRST_THREAD = [
    "first question",
    "Answer 1 to: first question",
    "second question",
    "Answer 2 to: second question",
    "third question",
    "Answer 3 to: third question",
]
FORKED = [*FIRST_THREAD[:2], "second question, edited", "Answer 5 to: second question, edited"]
# Answer 6 is the slow one, stopped before it ended.
AFTER_STOP = [*FORKED, "after the stop", "Answer 7 to: after the stop"]
SECOND_THREAD = ["hello from a second thread", "Answer 8 to: hello from a second thread"]

_reason = missing_requirement()
if _reason is not None and os.environ.get("CI"):
    pytest.fail(f"{_reason} (CI is set, so the browser test must run)", pytrace=False)
if _reason is not None:
    pytest.skip(_reason, allow_module_level=True)


class Brain:
    """The stub model: numbered answers quoting the latest human message; a slow one on request."""

    def __init__(self) -> None:
        self.answers = 0
        self.lock = threading.Lock()

    def __call__(self, body: Mapping[str, Any]) -> Any:
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        latest = str(users[-1].get("content")) if users else ""
        with self.lock:
            self.answers += 1
            number = self.answers
        if latest.startswith("slow"):
            return {"content": SLOW_ANSWER, "chunk_delay": 0.5}
        return f"Answer {number} to: {latest}"


class Session:
    """What the scenarios share: the page, the URLs, the threads they made."""

    def __init__(self, page: Page, ui_url: str, api_url: str, stub: OpenAIStub) -> None:
        self.page = page
        self.stub = stub
        self.ui_url = ui_url
        self.api_url = api_url
        self.api = httpx.Client(base_url=api_url, timeout=10)
        self.first_thread: str | None = None
        self.external: list[str] = []
        page.on("request", self._note_request)

    def _note_request(self, request: Request) -> None:
        if urlparse(request.url).hostname not in ("127.0.0.1", None):
            self.external.append(request.url)

    def home(self, thread_id: str | None = None) -> str:
        query = {"apiUrl": self.api_url, "assistantId": ASSISTANT_ID}
        if thread_id:
            query["threadId"] = thread_id
        return f"{self.ui_url}/?{urlencode(query)}"

    def thread_id(self) -> str | None:
        values = parse_qs(urlparse(self.page.url).query).get("threadId")
        return values[0] if values else None

    def send(self, text: str) -> None:
        box = self.page.get_by_placeholder("Type your message...")
        box.fill(text)
        box.press("Enter")

    def wait_idle(self) -> None:
        expect(self.page.get_by_role("button", name="Send")).to_be_visible(timeout=TIMEOUT_MS)

    def shown(self) -> list[str]:
        """The conversation as the page shows it: each message's text, top to bottom."""
        items = self.page.locator("div.max-w-3xl.mx-auto.flex.flex-col.gap-4 > div")
        texts = [t.split("\n\n")[0].strip() for t in items.all_inner_texts()]
        return [t for t in texts if t]

    def expect_shown(self, expected: list[str]) -> None:
        """Wait until the page shows exactly `expected` (the last message settles last)."""
        expect(self.page.get_by_text(expected[-1], exact=True)).to_be_visible()
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while self.shown() != expected and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.shown() == expected

    def state_texts(self, thread_id: str) -> list[str]:
        """The thread's current messages, from `GET /threads/{id}/state`."""
        state = self.api.get(f"/threads/{thread_id}/state").raise_for_status().json()
        return [str(m["content"]) for m in state["values"]["messages"]]

    def transcript_texts(self, thread_id: str) -> list[str]:
        """Every message ever recorded for the thread (`/transcript`), in order."""
        body = self.api.get(f"/threads/{thread_id}/transcript", params={"limit": 1000})
        entries = body.raise_for_status().json()["entries"]
        return [str(e["message"]["content"]) for e in entries if e["kind"] == "message"]

    def shot(self, name: str, hover: str | None = None) -> None:
        """Save a screenshot (with `FOLDWISE_WRITE_SCREENSHOTS=1`), hovering `hover`'s text."""
        if hover is None:
            self.page.mouse.move(0, 0)
        else:
            self.page.get_by_text(hover, exact=True).hover()
        if WRITE_SCREENSHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(SHOTS / f"agent-chat-ui-{name}.png"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def session(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    tmp_path = tmp_path_factory.mktemp("agent-chat-ui")
    dist = build_ui()
    with serve_static(dist) as ui_url, OpenAIStub(Brain(), chunk_size=8) as stub:
        config_path = write_config(tmp_path, stub)
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        config["gateway"] = {"cors_origins": [ui_url]}
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        with serving(config_path, tmp_path, pythonpath=[ROOT]) as server:
            api_url = server.url
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            state = Session(page, ui_url, api_url, stub)
            try:
                yield state
            finally:
                state.api.close()
                context.close()


def test_three_messages_in_one_thread(session: Session) -> None:
    page = session.page
    page.goto(session.home())
    for n, text in enumerate(("first question", "second question", "third question"), 1):
        session.send(text)
        expect(page.get_by_text(f"Answer {n} to: {text}")).to_be_visible()
        session.wait_idle()
    session.first_thread = session.thread_id()
    assert session.first_thread, page.url
    assert session.shown() == FIRST_THREAD
    assert session.state_texts(session.first_thread) == FIRST_THREAD
    session.shot("three-messages")


def first_thread(session: Session) -> str:
    if session.first_thread is None:
        pytest.skip("the first scenario did not create the thread")
    return session.first_thread


def test_reload_shows_the_history(session: Session) -> None:
    thread_id = first_thread(session)
    session.page.reload()
    session.expect_shown(FIRST_THREAD)
    assert session.thread_id() == thread_id


def test_regenerate_replaces_the_last_answer(session: Session) -> None:
    thread_id = first_thread(session)
    session.page.get_by_role("button", name="Refresh").last.click()
    regenerated = [*FIRST_THREAD[:5], "Answer 4 to: third question"]
    session.expect_shown(regenerated)
    session.wait_idle()
    assert session.state_texts(thread_id) == regenerated
    # The earlier answer is kept as another branch of the thread's history.
    session.page.get_by_text(regenerated[-1], exact=True).hover()
    expect(session.page.get_by_text("2 / 2", exact=True)).to_be_visible()
    assert session.thread_id() == thread_id


def test_edit_of_an_earlier_message_forks(session: Session) -> None:
    thread_id = first_thread(session)
    page = session.page
    page.get_by_role("button", name="Edit").nth(1).click()
    editor = page.locator("textarea").first
    expect(editor).to_have_value("second question")
    editor.fill("second question, edited")
    page.get_by_role("button", name="Submit").click()
    forked = FORKED
    session.expect_shown(forked)
    session.wait_idle()
    # The UI finds the fork in the thread's history: the edited message is branch 2 of 2.
    page.get_by_text("second question, edited", exact=True).hover()
    expect(page.get_by_text("2 / 2", exact=True)).to_be_visible()
    session.shot("edit-fork", hover="second question, edited")
    assert session.state_texts(thread_id) == forked
    # The transcript is append-only: the abandoned branch stays, the fork is appended.
    assert session.transcript_texts(thread_id) == [
        *FIRST_THREAD,
        "Answer 4 to: third question",
        *forked[2:],
    ]


def eventually(check: Callable[[], bool], seconds: float = 10) -> bool:
    """Whether `check()` comes true within `seconds` (polled every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def runs(session: Session, thread_id: str) -> list[dict[str, Any]]:
    response = session.api.get(f"/threads/{thread_id}/runs", params={"limit": 50})
    return list(response.raise_for_status().json())


def test_stop_during_a_slow_reply(session: Session) -> None:
    thread_id = first_thread(session)
    page = session.page
    before = len(runs(session, thread_id))
    session.send("slow: take your time")
    cancel = page.get_by_role("button", name="Cancel")
    expect(cancel).to_be_visible()
    expect(page.get_by_text("slow: take your time", exact=True)).to_be_visible()
    # The answer streams in, one piece every 0.5 s (the UI also asks for `messages-tuple`).
    expect(page.get_by_text(re.compile(r"^This slow answer"))).to_be_visible()
    session.shot("stop", hover=None)
    cancel.click()
    session.wait_idle()

    # The gateway ends the run (the SDK streams with on_disconnect="cancel"): it is
    # interrupted, not finished, and the thread is free again within seconds.
    def settled() -> bool:
        thread = session.api.get(f"/threads/{thread_id}").raise_for_status().json()
        latest = runs(session, thread_id)
        return thread["status"] == "idle" and len(latest) > before

    assert eventually(settled, 5), runs(session, thread_id)[:1]
    assert runs(session, thread_id)[0]["status"] == "interrupted"
    # The stored state has the accepted message and no answer; the page keeps the part it
    # had streamed (agent-chat-ui does not reload the thread after a stop).
    assert session.state_texts(thread_id) == [*FORKED, "slow: take your time"]
    *before_part, part = session.shown()
    assert before_part == [*FORKED, "slow: take your time"]
    assert SLOW_ANSWER.startswith(part) and len(part) < len(SLOW_ANSWER.strip()), part
    # ...and the gateway hung up on the model's stream instead of reading it to the end
    # (the stub notices at its next write).
    assert eventually(lambda: session.stub.abandoned == 1), session.stub.abandoned
    # The thread is usable afterwards: the next message gets its answer.
    session.send("after the stop")
    expect(page.get_by_text(AFTER_STOP[-1], exact=True)).to_be_visible()
    session.wait_idle()
    # The UI sends the head it knew (before the stopped run), so the next run continues from
    # there, as on LangGraph Server: the stopped message stays only in the transcript.
    assert session.state_texts(thread_id) == AFTER_STOP
    session.expect_shown(AFTER_STOP)
    assert session.transcript_texts(thread_id)[-4:] == [
        "Answer 5 to: second question, edited",
        "slow: take your time",
        *AFTER_STOP[-2:],
    ]


def test_second_thread_and_the_history_sidebar(session: Session) -> None:
    thread_id = first_thread(session)
    page = session.page
    page.get_by_role("button", name="New thread").click()
    expect(page.get_by_text("Answer 1 to: first question", exact=True)).to_have_count(0)
    assert session.thread_id() is None
    session.send(SECOND_THREAD[0])
    expect(page.get_by_text(SECOND_THREAD[1], exact=True)).to_be_visible()
    session.wait_idle()
    second = session.thread_id()
    assert second is not None and second != thread_id
    assert session.state_texts(second) == SECOND_THREAD
    # Open the history sidebar: both threads are listed by their first message.
    page.locator("button:has(svg.lucide-panel-right-close)").last.click()
    sidebar = page.locator("div.w-\\[300px\\]")
    expect(sidebar.get_by_role("button", name=SECOND_THREAD[0])).to_be_visible()
    first_entry = sidebar.get_by_role("button", name="first question")
    expect(first_entry).to_be_visible()
    session.shot("sidebar")
    first_entry.click()
    expect(page.get_by_text("Answer 1 to: first question", exact=True)).to_be_visible()
    assert session.thread_id() == thread_id
    session.expect_shown(AFTER_STOP)


def test_the_page_reached_only_loopback(session: Session) -> None:
    first_thread(session)
    assert session.external == []
