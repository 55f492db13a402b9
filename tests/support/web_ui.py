"""Fixtures for the browser tests of foldwise's own web page (`tests/test_web_ui.py`).

Two real `foldwise serve` subprocesses are driven by Debian's Chromium through Python
Playwright (never a downloaded browser): `foldwise serve --demo --port 0` (started with
`demo_server`, ready when it prints ``foldwise demo ready: http://127.0.0.1:PORT/ui``) and a
gateway with API keys whose model is the OpenAI stub (`live_config`, run with
`foldwise.bench._serve.serving`), on a SQLite file that `seed_long_thread` fills beforehand
with a 2,000-message thread.
`ConsoleWatch` collects a page's console errors and uncaught exceptions; `shoot` saves a
screenshot as ``docs/img/ui-<view>-<size>.png`` with ``FOLDWISE_WRITE_SCREENSHOTS=1`` (`make
screenshots`), else under the git-ignored ``tests/browser/build/ui/``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, HumanMessage

from foldwise.bench._serve import (
    ServerExitError,
    child_env,
    stop_process,
    stub_model_entry,
    write_config,
)
from foldwise.gateway._capture import compaction_marker
from foldwise.gateway._messages import message_record
from foldwise.gateway.storage import TranscriptEvent, open_storage

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Error, Locator, Page, ViewportSize

    from tests.support.openai_stub import OpenAIStub

__all__ = [
    "API_KEY",
    "API_USER",
    "BLUR",
    "CHROMIUM",
    "DESKTOP",
    "FOCUS_RING",
    "PHONE",
    "ROOT",
    "SHOTS",
    "TIMEOUT_MS",
    "ConsoleWatch",
    "View",
    "demo_server",
    "expect_streamed_reply",
    "label_of",
    "live_config",
    "missing_requirement",
    "newest_seq",
    "number_pattern",
    "open_view",
    "seed_long_thread",
    "settle",
    "shoot",
    "watch_stream",
]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
WRITE_SCREENSHOTS = os.environ.get("FOLDWISE_WRITE_SCREENSHOTS") == "1"
# `make screenshots` (FOLDWISE_WRITE_SCREENSHOTS=1) refreshes the committed ones in docs/img;
# otherwise every run still renders each view but keeps the files out of the work tree.
SHOTS = ROOT / "docs" / "img" if WRITE_SCREENSHOTS else ROOT / "tests" / "browser" / "build" / "ui"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000
API_KEY = "web-ui-test-key"
API_USER = "ui-tester"
READY = re.compile(r"foldwise demo ready: (http://127\.0\.0\.1:\d+)/ui")
_HIDDEN_ENV = ("OPENAI_", "ANTHROPIC_", "FOLDWISE_", "LANGSMITH_", "LANGCHAIN_")


def missing_requirement() -> str | None:
    """Why the web page's browser tests cannot run on this machine, or None."""
    if not CHROMIUM.is_file():
        return f"Chromium not found at {CHROMIUM} (Debian package `chromium`; .ci/run installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "Python playwright is not installed (a dev dependency: run `make install`)"
    return None


@contextmanager
def demo_server(cwd: Path, *, timeout: float = 120) -> Iterator[str]:
    """Run `foldwise serve --demo --port 0`; yield its origin once it printed the ready line.

    Output (stdout and stderr) is copied to ``cwd/demo.log``, which an error quotes.
    """
    log_path = cwd / "demo.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--demo", "--port", "0"]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=child_env(pythonpath=[ROOT]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        with log_path.open("wb") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                match = READY.search(line.decode("utf-8", "replace"))
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
        ready.set()  # the process ended: wake the waiter

    reader = threading.Thread(target=pump, name="demo-stdout", daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout) or not found:
            raise AssertionError(
                f"`foldwise serve --demo` printed no ready line within {timeout:.0f} s "
                f"(exit code {process.poll()}):\n{log_path.read_text(errors='replace')}"
            )
        yield found[0]
    finally:
        code = stop_process(process)
        reader.join(10)
        if process.stdout is not None:
            process.stdout.close()
    if code != 0:  # only reached when the tests with it did not raise
        raise ServerExitError(f"the demo exited with {code}:\n{log_path.read_text('utf-8')}")


def live_config(tmp_path: Path, stub: OpenAIStub) -> Path:
    """A `foldwise.yaml` with an API key and a tiny context window on the OpenAI stub.

    A few exchanges of the stub's long answers cross the 1,500-token trigger, so automatic
    compaction happens in the test; keep is 2 messages and there is no minimum gain.
    """
    config = {
        "models": [stub_model_entry(stub.url, stream_usage=True, context_window=6000)],
        "summarization": {
            "trigger": {"type": "tokens", "value": 1500},
            "keep": {"type": "messages", "value": 2},
            "reserved_output_tokens": 500,
            "min_gain_tokens": 0,
        },
        "storage": {"url": "sqlite:///data/foldwise.db"},
        "offload": {"root": "artifacts"},
        "gateway": {"auth": {"api_keys": [{"key": API_KEY, "user": API_USER}]}},
    }
    return write_config(tmp_path, config)


def _long_messages(count: int, start: datetime) -> list[TranscriptEvent]:
    events = []
    for i in range(count):
        at = start + timedelta(seconds=i)
        if i % 2 == 0:
            message: Any = HumanMessage(f"Question {i}: how does fold number {i} work?", id=f"m{i}")
        else:
            message = AIMessage(
                f"Answer {i}: fold {i} keeps the recent turns and summarizes the rest.",
                id=f"m{i}",
                usage_metadata={"input_tokens": 40 + i, "output_tokens": 20, "total_tokens": 60},
            )
        events.append(
            TranscriptEvent(
                kind="message", message=message_record(message), message_id=f"m{i}", created_at=at
            )
        )
    return events


async def _seed(url: str, thread_id: str, owner: str, messages: int, markers: int) -> None:
    storage = open_storage(url)
    await storage.setup()
    try:
        await storage.create_thread(thread_id, {"purpose": "2000 messages"}, owner=owner)
        events = _long_messages(messages, datetime(2025, 1, 1, tzinfo=UTC))
        step = messages // (markers + 1)
        for part in range(markers + 1):
            chunk = events[part * step : messages if part == markers else (part + 1) * step]
            await storage.append_transcript(thread_id, chunk)
            if part < markers:
                receipt = {
                    "id": f"seeded-{part + 1}",
                    "trigger": "tokens",
                    "tokens_before": 5000 + part,
                    "tokens_after": 900,
                    "messages_removed": step - 4,
                    "messages_preserved": 4,
                    "model_used": "seeded",
                    "created_at": chunk[-1].created_at.isoformat() if chunk[-1].created_at else "",
                }
                await storage.add_receipt(
                    thread_id, receipt, marker=compaction_marker(receipt, None)
                )
    finally:
        await storage.aclose()


def seed_long_thread(
    url: str, *, thread_id: str, owner: str, messages: int = 2000, markers: int = 4
) -> None:
    """Write a thread with `messages` transcript messages and `markers` compaction markers.

    Goes through the gateway storage API on the SQLite file `url` before any server runs on it
    (the server's migrations then find the schema in place). Runs in its own thread: the
    Playwright sync API keeps an event loop running in the calling one.
    """
    failures: list[BaseException] = []

    def work() -> None:
        try:
            asyncio.run(_seed(url, thread_id, owner, messages, markers))
        except BaseException as error:  # re-raised in the caller
            failures.append(error)

    worker = threading.Thread(target=work, name="seed-long-thread")
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


class ConsoleWatch:
    """Collects a page's console messages of type error and its uncaught exceptions."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", self._page_error)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console.error: {message.text} ({message.location})")

    def _page_error(self, error: Error) -> None:
        self.errors.append(f"page error: {error.message}")

    def take(self, allowed: Sequence[str] = ()) -> list[str]:
        """The errors so far that match none of the `allowed` regexes; the list is emptied."""
        errors, self.errors = self.errors, []
        return [e for e in errors if not any(re.search(pattern, e) for pattern in allowed)]


def shoot(page: Page, view: str, size: str) -> Path:
    """Save ``ui-<view>-<size>.png`` in `SHOTS` (overwritten each run), the mouse parked."""
    page.mouse.move(0, 0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"ui-{view}-{size}.png"
    page.screenshot(path=str(path))
    return path


# Records every length the `streaming` element's text had, to see it grow during a run.
STREAM_SPY = """() => {
  window.__streamLengths = [];
  if (window.__streamSpy) window.__streamSpy.disconnect();
  const note = () => {
    const el = document.querySelector('[data-testid="streaming"]');
    if (!el) return;
    const seen = window.__streamLengths, n = el.textContent.length;
    if (seen[seen.length - 1] !== n) seen.push(n);
  };
  window.__streamSpy = new MutationObserver(note);
  window.__streamSpy.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
NO_SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth + 1"
BLUR = "() => document.activeElement && document.activeElement.blur()"
FOCUS_RING = """el => {
  const s = getComputedStyle(el);
  return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
}"""


def settle(check: Callable[[], bool], what: str, seconds: float = TIMEOUT_MS / 1000) -> None:
    """Poll `check` every 50 ms until it holds; fail naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def label_of(target: Locator) -> str:
    """An element's text with its title and aria-label (what a reader or a tooltip shows)."""
    return str(
        target.evaluate(
            "el => [el.textContent, el.getAttribute('title'), el.getAttribute('aria-label')]"
            ".filter(Boolean).join(' ')"
        )
    )


def number_pattern(value: int) -> str:
    """A regex for `value` written plainly or with thousands separators."""
    return f"(?<![0-9]){value:,}(?![0-9])|(?<![0-9,]){value}(?![0-9,])"


@dataclass
class View:
    """One page at one viewport, with its console watch."""

    page: Page
    watch: ConsoleWatch
    size: str
    base: str

    def go(self, route: str = "") -> None:
        """Open `/ui#/<route>`."""
        self.page.goto(f"{self.base}/ui#/{route}")

    def tid(self, name: str) -> Locator:
        """The elements with `data-testid=name`."""
        return self.page.get_by_test_id(name)

    def clean(self, *allowed: str) -> None:
        """No console errors or page errors since the last check (but the `allowed` regexes)."""
        assert self.watch.take(allowed) == []

    def fits(self) -> None:
        """Nothing is wider than the viewport (no sideways scrolling)."""
        assert self.page.evaluate(NO_SIDEWAYS_SCROLL), f"sideways scroll at {self.size}"

    def shot(self, view: str) -> None:
        """Save `docs/img/ui-<view>-<size>.png`."""
        self.fits()
        shoot(self.page, view, self.size)

    def seqs(self) -> list[int]:
        """The `data-seq` of every rendered message, in DOM order (messages without one skipped)."""
        values = self.tid("message").evaluate_all("els => els.map(e => e.dataset.seq)")
        return [int(v) for v in values if isinstance(v, str) and v.isdigit()]

    def reveal(self, target: Locator, tries: int = 40) -> Locator:
        """Load older transcript pages until `target` is rendered; return its first element."""
        from playwright.sync_api import expect

        expect(self.tid("message").first).to_be_attached()
        for _ in range(tries):
            if target.count():
                break
            older = self.tid("load-older")
            if not older.count() or not older.first.is_visible():
                break
            before = self.seqs()
            older.first.click()
            settle(lambda b=before: self.seqs() != b, "load-older rendered more messages")
        if not target.count():
            older = self.tid("load-older")
            seqs = self.seqs()
            raise AssertionError(
                f"{target} is not in the transcript, even after loading older pages "
                f"(messages {min(seqs, default=None)}..{max(seqs, default=None)}, "
                f"load-older: {older.count()} element(s), "
                f"visible: {older.count() > 0 and older.first.is_visible()})"
            )
        target.first.scroll_into_view_if_needed()
        return target.first

    def send(self, text: str) -> None:
        """Type `text` in the composer and press Enter."""
        box = self.tid("composer-input")
        box.fill(text)
        box.press("Enter")

    def tab_to(self, testid: str, *, key: str = "Tab", limit: int = 400) -> Locator:
        """Press `key` until focus is on (or inside) an element with `testid`; return it."""
        probe = f"() => !!document.activeElement?.closest('[data-testid=\"{testid}\"]')"
        for _ in range(limit):
            self.page.keyboard.press(key)
            if self.page.evaluate(probe):
                return self.page.locator(f'[data-testid="{testid}"]:focus-within').first
        raise AssertionError(f"{limit} presses of {key} never focused [data-testid={testid}]")


def watch_stream(view: View) -> None:
    """Start recording the lengths of the `streaming` element's text (see `STREAM_SPY`)."""
    view.page.evaluate(STREAM_SPY)


def stream_lengths(view: View) -> list[int]:
    """The lengths recorded since `watch_stream`."""
    return list(view.page.evaluate("() => window.__streamLengths"))


def newest_seq(view: View) -> int:
    """The highest `data-seq` among the rendered messages (0 when none)."""
    return max(view.seqs(), default=0)


def expect_streamed_reply(view: View, seq_before: int) -> None:
    """The run streamed (the `streaming` text grew), then ended as a new AI `message`."""
    last = view.tid("message").last
    settle(
        lambda: newest_seq(view) > seq_before and last.get_attribute("data-role") == "ai",
        "the answer became the newest message (data-role=ai)",
    )
    from playwright.sync_api import expect

    expect(view.tid("streaming")).to_have_count(0)
    lengths = stream_lengths(view)
    assert len(lengths) >= 2 and lengths == sorted(lengths) and lengths[-1] > 0, lengths


def open_view(browser: Browser, base: str, size: str) -> Iterator[View]:
    """A fresh browser context at the `size` viewport (`desktop` or `phone`) on `base`.

    A generator for module fixtures; at the end it fails on console errors nobody took.
    """
    context = browser.new_context(viewport=PHONE if size == "phone" else DESKTOP)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    view = View(page, ConsoleWatch(page), size, base)
    try:
        yield view
    finally:
        leftover = view.watch.take()
        context.close()
        assert leftover == [], leftover
