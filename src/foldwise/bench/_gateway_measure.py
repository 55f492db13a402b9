"""The measurements of `foldwise bench gateway`, made with the official `langgraph_sdk` client.

Every phase talks to a `Target` from outside, over HTTP, the way an application would:

- `sequential`: ``threads.create`` then ``runs.wait`` (one user message), one after another;
  the latency of the pair, after a few untimed warm-up pairs;
- `growing`: one thread, ``runs.wait`` turn after turn; each turn's latency, the median of
  the last `window` turns and the least-squares slope over all turns (ms per turn);
- `concurrent`: `clients` clients for `seconds`, each repeating create + wait (one request
  = one pair, the same unit as `sequential`); completed requests per second of wall time,
  while `RssSampler` samples the server's RSS once a second;
- `streaming`: ``runs.stream`` on a fresh thread; the time to its first event.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from foldwise.bench._gateway_targets import Target
from foldwise.bench._serve import MIB, RSS_TOLERANCE, RssSampler, percentile, rss_bytes, rss_growth

__all__ = ["ColumnResult", "Sizes", "measure"]

_ASSISTANT = "agent"


@dataclass(frozen=True)
class Sizes:
    """How much each phase does."""

    sequential: int
    warmup: int
    turns: int
    window: int
    clients: int
    seconds: float
    streams: int

    def capped(self, sequential: int, streams: int) -> Sizes:
        """The same sizes with at most `sequential` pairs and `streams` streams."""
        return Sizes(
            min(self.sequential, sequential),
            min(self.warmup, 2),
            self.turns,
            self.window,
            self.clients,
            self.seconds,
            min(self.streams, streams),
        )


@dataclass
class ColumnResult:
    """One server's figures (milliseconds, requests per second, MiB)."""

    label: str
    create_wait_p50: float = 0.0
    create_wait_p99: float = 0.0
    sequential_samples: int = 0
    turns_p50: float = 0.0
    turns_window: str = ""
    growth_ms_per_turn: float = 0.0
    requests_per_second: float = 0.0
    concurrent_requests: int = 0
    concurrent_errors: int = 0
    concurrent_p50: float = 0.0
    stream_first_event_p50: float = 0.0
    stream_samples: int = 0
    rss_after_mib: float = 0.0
    rss_growth_mib: float = 0.0
    rss_flat: bool = False
    rss_samples: int = 0
    turn_latencies: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the per-turn latencies rounded to 0.1 ms)."""
        data = asdict(self)
        data["turn_latencies"] = [round(v, 1) for v in self.turn_latencies]
        return data


def _message(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def _create_and_wait(client: Any, text: str) -> float:
    started = time.perf_counter()
    thread = await client.threads.create()
    values = await client.runs.wait(thread["thread_id"], _ASSISTANT, input=_message(text))
    elapsed = (time.perf_counter() - started) * 1000
    _check_answer(values, text)
    return elapsed


def _check_answer(values: Any, text: str) -> None:
    """Raise unless the run's final values end with the stub's answer to `text`."""
    messages = values.get("messages") if isinstance(values, dict) else None
    last = messages[-1] if messages else {}
    if f"re: {text}" not in str(last.get("content", "")):
        raise RuntimeError(f"unexpected run result for {text!r}: {str(values)[:300]}")


async def _sequential(client: Any, result: ColumnResult, sizes: Sizes) -> None:
    for n in range(sizes.warmup):
        await _create_and_wait(client, f"warm-up {n}")
    latencies = [await _create_and_wait(client, f"hello {n}") for n in range(sizes.sequential)]
    result.create_wait_p50 = percentile(latencies, 50)
    result.create_wait_p99 = percentile(latencies, 99)
    result.sequential_samples = len(latencies)


async def _growing(client: Any, result: ColumnResult, sizes: Sizes) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    latencies = []
    for turn in range(1, sizes.turns + 1):
        started = time.perf_counter()
        values = await client.runs.wait(thread_id, _ASSISTANT, input=_message(f"turn {turn}"))
        latencies.append((time.perf_counter() - started) * 1000)
        _check_answer(values, f"turn {turn}")
    window = latencies[-sizes.window :]
    result.turn_latencies = latencies
    result.turns_p50 = statistics.median(window)
    result.turns_window = f"{sizes.turns - len(window) + 1}-{sizes.turns}"
    turns = list(range(1, len(latencies) + 1))
    result.growth_ms_per_turn = statistics.linear_regression(turns, latencies).slope


async def _client_loop(
    client: Any, number: int, deadline: float, latencies: list[float], errors: list[str]
) -> None:
    n = 0
    while time.perf_counter() < deadline:
        n += 1
        try:
            latencies.append(await _create_and_wait(client, f"client {number} request {n}"))
        except Exception as error:
            errors.append(f"{type(error).__name__}: {error}"[:200])


async def _concurrent(url: str, pid: int, result: ColumnResult, sizes: Sizes) -> None:
    from langgraph_sdk import get_client

    latencies: list[float] = []
    errors: list[str] = []
    clients = [get_client(url=url, api_key=None) for _ in range(sizes.clients)]
    with RssSampler(pid) as rss:
        started = time.perf_counter()
        deadline = started + sizes.seconds
        await asyncio.gather(
            *(_client_loop(c, n, deadline, latencies, errors) for n, c in enumerate(clients))
        )
        elapsed = time.perf_counter() - started
    for client in clients:
        await client.aclose()
    result.concurrent_requests = len(latencies)
    result.concurrent_errors = len(errors)
    result.requests_per_second = len(latencies) / elapsed
    result.concurrent_p50 = percentile(latencies, 50)
    _rss(result, rss.samples, pid)


def _rss(result: ColumnResult, samples: Sequence[int], pid: int) -> None:
    after = rss_bytes(pid)
    result.rss_after_mib = (after or (samples[-1] if samples else 0)) / MIB
    result.rss_samples = len(samples)
    thirds = rss_growth(samples)
    if thirds is None:
        return
    middle, last = thirds
    share, absolute = RSS_TOLERANCE
    result.rss_growth_mib = (last - middle) / MIB
    result.rss_flat = last - middle <= max(share * middle, absolute)


async def _streaming(client: Any, result: ColumnResult, sizes: Sizes) -> None:
    firsts = []
    for n in range(sizes.streams):
        thread_id = (await client.threads.create())["thread_id"]
        started = time.perf_counter()
        first = None
        parts = client.runs.stream(thread_id, _ASSISTANT, input=_message(f"stream {n}"))
        async for _part in parts:
            if first is None:
                first = (time.perf_counter() - started) * 1000
        if first is None:
            raise RuntimeError(f"runs.stream on {thread_id} sent no event")
        firsts.append(first)
    result.stream_first_event_p50 = percentile(firsts, 50)
    result.stream_samples = len(firsts)


async def ameasure(target: Target, sizes: Sizes) -> ColumnResult:
    """Every phase against `target`, in order: sequential, growing, streaming, concurrent."""
    from langgraph_sdk import get_client

    result = ColumnResult(target.label)
    async with get_client(url=target.url, api_key=None) as client:
        await _sequential(client, result, sizes)
        await _growing(client, result, sizes)
        await _streaming(client, result, sizes)
    await _concurrent(target.url, target.pid, result, sizes)
    return result


def measure(target: Target, sizes: Sizes) -> ColumnResult:
    """`ameasure` in a fresh event loop."""
    return asyncio.run(ameasure(target, sizes))
