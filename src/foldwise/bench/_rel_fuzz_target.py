"""The fuzzing area's target: the gateway app in-process, on its own event loop, and the checks.

`FuzzTarget` runs `create_app(config)` with its lifespan on a private event loop in a thread
and sends requests through `httpx.ASGITransport`, so the (synchronous) hypothesis engine can
drive it request by request. It seeds a thread with runs, a compaction, a pasted-input
artifact and a memory fact, whose ids the cases use to reach past the 404s.

`check_response` holds the area's expectations for one answer: no 5xx for a client's mistake,
no traceback or Python repr in any body, every 4xx a JSON `{"detail": ...}` (naming the field
when the case knows which one it broke).
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute

from foldwise.bench._reliability import Finding
from foldwise.config import FoldwiseConfig, parse_config
from foldwise.gateway import AgentRequest, HostedAgent, create_app

__all__ = [
    "API_KEY",
    "MAX_BODY",
    "FuzzTarget",
    "Sent",
    "check_response",
    "fuzz_config",
    "hidden_routes",
]

API_KEY = "fuzz-key"
"""The one API key of the fuzzed gateway (sent with every request unless a case drops it)."""

MAX_BODY = 64 * 1024
"""`gateway.max_body_bytes` of the fuzzed gateway: small, so cases around it stay quick."""

PASTE = "\n".join(f"pasted line {i} with enough words to be offloaded" for i in range(160))

_T = TypeVar("_T")

# What a body must never show: a traceback, a frame, an object repr, a module of the stack, or
# the name of an exception class that only a bug lets out.
_LEAK = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]{1,300}\", line \d+"
    r"|<[A-Za-z_][\w.]* object at 0x[0-9a-fA-F]+>"
    r"|site-packages"
    r"|\b(?:sqlite3|psycopg|aiosqlite|pydantic_core|starlette|langgraph)\.[a-z_]+\.?[A-Z]\w+"
    r"|\b(?:OverflowError|AttributeError|KeyError|TypeError|IndexError|RecursionError"
    r"|UnicodeDecodeError|UnicodeEncodeError|AssertionError|NotImplementedError"
    r"|DataError|OperationalError|IntegrityError|ProgrammingError)\b"
)


# How the detail of a 400 or 422 names what was wrong when the case does not say which field:
# `field.path: message` (validation, `RequestFieldError`; a path may hold any key a client
# sent), or `invalid thread id '...'`.
_NAMES_FIELD = re.compile(r"^(?:[^;\n]+?: |invalid [\w -]{1,40} (?:id|header)\b)")


def fuzz_config(workdir: Path, postgres_url: str | None = None) -> FoldwiseConfig:
    """The fuzzed gateway: one API key, memory on, a small body limit, quick offloads."""
    storage = postgres_url or f"sqlite:///{workdir / 'fuzz.db'}"
    return parse_config(
        {
            "storage": {"url": storage},
            "offload": {
                "root": str(workdir / "artifacts"),
                "human_token_limit": 800,
                "preview_chars": 200,
            },
            "gateway": {
                "max_body_bytes": MAX_BODY,
                "auth": {"api_keys": [{"key": API_KEY, "user": "fuzzer"}]},
            },
            "memory": {"enabled": True},
        }
    )


def _factory(request: AgentRequest) -> HostedAgent:
    # Imported here: the scripted model is only needed when the area runs.
    import foldwise
    from foldwise.replay._scripted import ScriptedChatModel

    model = ScriptedChatModel(default="ok, noted")
    graph = foldwise.create_agent(
        request.config,
        model=model,
        checkpointer=request.checkpointer,
        memory_worker=False,  # the gateway runs the process's one worker
    )
    return HostedAgent(graph)


def hidden_routes(app: FastAPI) -> list[tuple[str, str]]:
    """`(method, path)` of every route left out of the OpenAPI schema (`include_in_schema`)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: Iterable[Any]) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:  # FastAPI >= 0.16x keeps included routers as one node
                walk(inner.routes)
            elif (isinstance(route, APIRoute) or hasattr(route, "methods")) and not getattr(
                route, "include_in_schema", True
            ):
                methods = getattr(route, "methods", None) or ()
                found.update((m, route.path) for m in methods if m != "HEAD")

    walk(app.routes)
    return sorted(found, key=lambda item: (item[1], item[0]))


@dataclass
class Sent:
    """One request the area sent and what came back.

    Attributes:
        case: The case's name (route and what was broken).
        status: The response status.
        body: The response body.
        field: The field the case broke, which the `detail` of a 400 or 422 must name
            (`a|b`: either), or `None`.
    """

    case: str
    status: int
    body: bytes
    field: str | None = None


def _detail(body: bytes) -> Any:
    import json

    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("detail") if isinstance(data, dict) else None


def _names_field(detail: str, field: str | None) -> bool:
    if field is None:
        return _NAMES_FIELD.match(detail) is not None
    return any(name in detail for name in field.split("|"))


def check_response(sent: Sent) -> list[Finding]:
    """The violations of one answer (an empty list when it is as expected)."""
    found: list[Finding] = []
    text = sent.body.decode("utf-8", "replace")
    if sent.status >= 500:
        found.append(Finding(sent.case, "no-5xx", f"{sent.status}: {text[:200]}"))
    leak = _LEAK.search(text)
    if leak:
        around = text[max(0, leak.start() - 60) : leak.end() + 60]
        found.append(Finding(sent.case, "no-traceback", f"{sent.status}: ...{around}..."))
    if 400 <= sent.status < 500:
        detail = _detail(sent.body)
        if not isinstance(detail, str) or not detail.strip():
            found.append(
                Finding(sent.case, "detail", f"{sent.status} without a detail: {text[:200]}")
            )
        elif sent.status in (400, 422) and not _names_field(detail, sent.field):
            wanted = sent.field or "a field"
            found.append(
                Finding(sent.case, "detail-names-field", f"{wanted!r} not in {detail[:200]!r}")
            )
    return found


@dataclass
class Seeded:
    """Ids of objects that exist on the fuzzed gateway (so cases reach past the 404s)."""

    thread_id: str = ""
    run_id: str = ""
    checkpoint_id: str = ""
    artifact_id: str = ""
    fact_id: str = ""
    assistant_id: str = "agent"
    extra: dict[str, str] = field(default_factory=dict)

    def path_ids(self) -> dict[str, str]:
        """Path parameter name -> a seeded id."""
        return {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "checkpoint_id": self.checkpoint_id,
            "artifact_id": self.artifact_id,
            "fact_id": self.fact_id,
            "assistant_id": self.assistant_id,
            "asset": "index.html",
            "namespace": "agent",
        }


class FuzzTarget:
    """The gateway running in-process on a private event loop; `send` blocks for one answer.

    Args:
        config: The gateway configuration (`fuzz_config`).
    """

    def __init__(self, config: FoldwiseConfig) -> None:
        self.app = create_app(config, agent_factory=_factory, shutdown_grace_seconds=2.0)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._stop: asyncio.Event | None = None
        self._ready: Future[None] = Future()
        self._done: Future[None] | None = None
        self.client: httpx.AsyncClient | None = None
        self.seeded = Seeded()

    def __enter__(self) -> FuzzTarget:
        self._thread.start()
        self._done = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self._ready.result(timeout=120)
        self.seeded = self.call(self._seed())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._done is not None:
            self._done.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with self.app.router.lifespan_context(self.app):
                transport = httpx.ASGITransport(app=self.app)
                async with httpx.AsyncClient(
                    transport=transport,
                    base_url="http://testserver",
                    timeout=60,
                ) as client:
                    self.client = client
                    self._ready.set_result(None)
                    await self._stop.wait()
        except BaseException as error:
            if not self._ready.done():
                self._ready.set_exception(error)
            raise

    def call(self, coroutine: Coroutine[Any, Any, _T], timeout: float = 120) -> _T:
        """Run a coroutine on the target's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout)

    def send(self, request: Mapping[str, Any]) -> httpx.Response:
        """Send one request (`httpx.AsyncClient.request` keyword arguments); return the answer."""
        assert self.client is not None
        client = self.client
        request = dict(request)
        headers = dict(request.get("headers") or {})
        if not {"x-api-key", "authorization"} & {str(k).lower() for k in headers}:
            headers["x-api-key"] = API_KEY
        request["headers"] = headers

        async def go() -> httpx.Response:
            response = await client.request(**request)
            await response.aread()
            return response

        return self.call(go())

    def healthy(self) -> bool:
        """Whether `GET /ok` answers 200."""
        try:
            return self.send({"method": "GET", "url": "/ok"}).status_code == 200
        except Exception:
            return False

    async def _seed(self) -> Seeded:
        assert self.client is not None
        c = self.client
        c.headers["x-api-key"] = API_KEY  # removed again below: each case sends its own
        seeded = Seeded(thread_id=f"fuzz-{uuid.uuid4().hex[:8]}")
        made = await c.post("/threads", json={"thread_id": seeded.thread_id})
        made.raise_for_status()
        for text in ("hello", PASTE, "one more", "and another"):
            body = {
                "assistant_id": "agent",
                "input": {"messages": [{"role": "user", "content": text}]},
            }
            (await c.post(f"/threads/{seeded.thread_id}/runs/wait", json=body)).raise_for_status()
        compact = await c.post(
            f"/threads/{seeded.thread_id}/compact", json={"keep": {"type": "messages", "value": 2}}
        )
        compact.raise_for_status()
        runs = (await c.get(f"/threads/{seeded.thread_id}/runs")).json()
        seeded.run_id = runs[0]["run_id"]
        state = (await c.get(f"/threads/{seeded.thread_id}/state")).json()
        seeded.checkpoint_id = state["checkpoint"]["checkpoint_id"]
        artifacts = (await c.get(f"/threads/{seeded.thread_id}/artifacts")).json()["artifacts"]
        seeded.artifact_id = artifacts[0]["artifact_id"]
        fact = await c.post("/memory/facts", json={"text": "I live in Munich"})
        fact.raise_for_status()
        seeded.fact_id = fact.json()["id"]
        del c.headers["x-api-key"]
        return seeded
