"""The load area's model: `OpenAIStub` in a child process, steered by the user's text.

Run as ``python path/to/_rel_load_stub.py`` (a script: it loads `_openai_stub.py`, which
needs only the standard library, by path, so it starts in milliseconds without importing
foldwise and LangChain): it prints the stub's URL on one line,
serves until its stdin is closed, then prints one JSON line of figures and exits. A child
process keeps the stub's request threads out of the load generator's GIL (both would
otherwise slow each other down and the latency would be the generator's, not the gateway's).

The answer to a request depends on its last user message (`reply`):

- the summarizer's request (its prompt holds ``<new_messages>``) gets a short summary;
- ``pad=N`` makes the answer N characters longer (to fill a small context window);
- ``delay=S`` holds the answer S seconds;
- ``hot=KEY`` counts the request as one model call on the contended thread KEY; the figures
  give, per key, the most calls ever in flight at once (more than one means two runs of one
  thread were executing together).

Every answer starts with ``re: <the user's text>``, so a client can tell whose answer it got.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from foldwise.bench._openai_stub import OpenAIStub, ScriptedResponse

__all__ = ["SUMMARY", "HotCounter", "last_user_text", "main", "reply"]

SUMMARY = "SUMMARY: earlier turns of a load test (numbered user lines and their echoes)."
_DIRECTIVE = re.compile(r"\b(pad|delay|hot)=(\d+(?:\.\d+)?|[a-z]+)\b")
_FILLER = "The quick brown fox jumps over the lazy dog. "


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the request's last user message (empty when there is none)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _is_summarizer(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and "<new_messages>" in _text(messages[0].get("content"))


class HotCounter:
    """Model calls in flight per contended thread, and the most ever seen at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def enter(self, key: str) -> None:
        """One more call on `key`."""
        with self._lock:
            self._now[key] += 1
            self.calls[key] += 1
            self.peak[key] = max(self.peak[key], self._now[key])

    def leave(self, key: str) -> None:
        """One call on `key` answered."""
        with self._lock:
            self._now[key] -= 1


def reply(body: Mapping[str, Any], hot: HotCounter) -> ScriptedResponse:
    """The answer to one request (see the module docstring)."""
    if _is_summarizer(body):
        return SUMMARY
    text = last_user_text(body)
    directives = dict(_DIRECTIVE.findall(text))
    pad = int(directives.get("pad", "0"))
    answer = f"re: {text}"
    if pad > 0:
        answer += " " + (_FILLER * (pad // len(_FILLER) + 1))[:pad]
    delay = float(directives.get("delay", "0"))
    key = directives.get("hot")
    if key is not None:
        hot.enter(key)
    try:
        if delay > 0:
            time.sleep(min(delay, 30.0))
    finally:
        if key is not None:
            hot.leave(key)
    return answer


def _stub_class() -> type[OpenAIStub]:
    """`OpenAIStub`, loaded from the file next to this one without importing foldwise."""
    path = Path(__file__).with_name("_openai_stub.py")
    spec = importlib.util.spec_from_file_location("_foldwise_load_openai_stub", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    stub_class: type[OpenAIStub] = module.OpenAIStub
    return stub_class


def main() -> None:
    """Serve until stdin closes; print the URL first and the figures last."""
    hot = HotCounter()

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        stub.requests.clear()  # the bodies are not needed; keep the child's memory flat
        return reply(body, hot)

    stub = _stub_class()(respond, chunk_size=64)
    with stub:
        print(stub.url, flush=True)
        sys.stdin.read()
    figures = {"peak": dict(hot.peak), "calls": dict(hot.calls)}
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
