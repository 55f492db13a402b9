"""The load of `foldwise bench scale`: N clients against one gateway URL for S seconds.

Each client is one `httpx.AsyncClient` (its own keep-alive connection, so the kernel spreads
the clients over a server's worker processes) and loops until the time is up:

- `create_wait`: ``POST /threads`` then ``POST /threads/{id}/runs/wait`` with one user message,
  timed as one operation (the issue-16 request);
- `mixed`: a seeded mix per client of a turn on the client's own growing thread (40 %),
  create + wait (20 %), a streamed run on a new thread read to its ``end`` (20 %) and reads of
  a thread, its state and transcript (20 %).

Every answer is checked for its own echo (the load stub answers ``re: <text>``); a wrong answer
or a status other than 200 counts as an error. The generator's own CPU time is measured: on a
small machine it competes with the server for the cores.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

__all__ = ["LoadResult", "Workload", "run_load"]

Workload = Literal["create_wait", "mixed"]

_ASSISTANT = "agent"
_TIMEOUT = 120.0


@dataclass
class LoadResult:
    """What one workload did: latencies per operation kind (seconds), errors, time, CPU."""

    workload: str
    clients: int
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    client_cpu_seconds: float = 0.0

    @property
    def operations(self) -> int:
        """Operations that succeeded."""
        return sum(len(v) for v in self.latencies.values())

    def all_latencies(self) -> list[float]:
        """Every successful operation's latency."""
        return [x for values in self.latencies.values() for x in values]

    def fail(self, detail: str) -> None:
        """Count an error; keep the first few details."""
        self.error_count += 1
        if len(self.errors) < 5:
            self.errors.append(detail[:300])


def _say(text: str) -> dict[str, Any]:
    return {
        "assistant_id": _ASSISTANT,
        "input": {"messages": [{"role": "user", "content": text}]},
    }


def _answered(values: Any, text: str) -> bool:
    messages = values.get("messages") if isinstance(values, dict) else None
    if not isinstance(messages, list) or not messages:
        return False
    return str(messages[-1].get("content", "")).startswith(f"re: {text}")


class _Client:
    """One simulated client: its connection, its own thread and its random choices."""

    def __init__(self, url: str, index: int, result: LoadResult, seed: int) -> None:
        self.http = httpx.AsyncClient(base_url=url, timeout=_TIMEOUT, trust_env=False)
        self.index = index
        self.result = result
        self.random = random.Random(seed * 1000 + index)
        self.thread: str | None = None
        self.turn = 0

    async def _checked(self, response: Awaitable[httpx.Response], what: str) -> Any:
        got = await response
        if got.status_code != 200:
            raise _OperationError(f"{what}: HTTP {got.status_code} {got.text[:200]}")
        return (
            got.json()
            if got.headers.get("content-type", "").startswith("application/json")
            else got.text
        )

    async def new_thread(self) -> str:
        thread = await self._checked(self.http.post("/threads", json={}), "create thread")
        return str(thread["thread_id"])

    async def wait(self, thread_id: str, text: str) -> None:
        path = f"/threads/{thread_id}/runs/wait"
        values = await self._checked(self.http.post(path, json=_say(text)), "runs/wait")
        if not _answered(values, text):
            raise _OperationError(f"runs/wait on {thread_id}: not the answer to {text!r}")

    async def create_wait(self) -> None:
        text = f"client {self.index} hello"
        await self.wait(await self.new_thread(), text)

    async def own_turn(self) -> None:
        if self.thread is None:
            self.thread = await self.new_thread()
        self.turn += 1
        await self.wait(self.thread, f"client {self.index} turn {self.turn}")

    async def stream(self) -> None:
        thread_id = await self.new_thread()
        body = {**_say(f"client {self.index} streamed"), "stream_mode": ["values"]}
        path = f"/threads/{thread_id}/runs/stream"
        async with self.http.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                raise _OperationError(f"runs/stream: HTTP {response.status_code}")
            text = "".join([chunk async for chunk in response.aiter_text()])
        if "event: end" not in text or "event: error" in text:
            raise _OperationError(f"runs/stream on {thread_id}: no clean end")

    async def read(self) -> None:
        if self.thread is None:
            await self.own_turn()
        assert self.thread is not None
        for path in ("", "/state", "/transcript"):
            await self._checked(self.http.get(f"/threads/{self.thread}{path}"), f"GET {path}")

    def pick(self, workload: Workload) -> tuple[str, Callable[[], Awaitable[None]]]:
        if workload == "create_wait":
            return "create_wait", self.create_wait
        draw = self.random.random()
        if draw < 0.4:
            return "turn", self.own_turn
        if draw < 0.6:
            return "create_wait", self.create_wait
        if draw < 0.8:
            return "stream", self.stream
        return "read", self.read


class _OperationError(Exception):
    """An operation's answer was not a success."""


async def _client_loop(client: _Client, workload: Workload, deadline: float) -> None:
    result = client.result
    try:
        while time.perf_counter() < deadline:
            kind, operation = client.pick(workload)
            started = time.perf_counter()
            try:
                await operation()
            except (_OperationError, httpx.HTTPError) as error:
                result.fail(f"{kind}: {type(error).__name__}: {error}")
                continue
            result.latencies[kind].append(time.perf_counter() - started)
    finally:
        await client.http.aclose()


async def _warm(client: _Client, into: LoadResult) -> None:
    try:
        await client.create_wait()
    except (_OperationError, httpx.HTTPError) as error:
        into.fail(str(error))


async def run_load(
    url: str, workload: Workload, *, clients: int, seconds: float, seed: int = 0
) -> LoadResult:
    """Drive `url` with `clients` clients for `seconds` seconds; return what they saw."""
    result = LoadResult(workload, clients, seconds)
    pool = [_Client(url, index, result, seed) for index in range(clients)]
    # Warm-up, not counted: every connection opened, every worker past its first run.
    warmup = LoadResult(workload, clients, 0.0)
    await asyncio.gather(*(_warm(client, warmup) for client in pool))
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_client_loop(client, workload, deadline) for client in pool))
    result.seconds = time.perf_counter() - started
    result.client_cpu_seconds = time.process_time() - cpu
    return result
