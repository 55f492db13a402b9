"""The measurements of `foldwise bench gateway`, made with the official `langgraph_sdk` client.

Every phase talks to a `Target` from outside, over HTTP, the way an application would:

- `sequential`: ``threads.create`` then ``runs.wait`` (one user message), one after another;
  the latency of the pair, after a few untimed warm-up pairs;
- `growing`: `threads` threads (one by default), ``runs.wait`` turn after turn, the threads
  taking turns; each turn's latency, the median of the last `window` turns (of every thread)
  and the least-squares slope over all turns (ms per turn);
- `concurrent`: `clients` clients for `seconds`, each repeating create + wait (one request
  = one pair, the same unit as `sequential`); completed requests per second of wall time,
  while `RssSampler` samples the server's RSS once a second;
- `streaming`: ``runs.stream`` on a fresh thread; the time to its first event.

Several targets are measured side by side (`ameasure`): they take turns request by request.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from foldwise.bench._gateway_targets import Target
from foldwise.bench._serve import MIB, RSS_TOLERANCE, RssSampler, percentile, rss_bytes, rss_growth

__all__ = ["ColumnResult", "GrowthFit", "Sizes", "growth_fit", "measure", "paired_growth"]

_ASSISTANT = "agent"
CONCURRENT_BLOCKS = 3
"""Blocks of the concurrent phase per target when several are measured side by side."""


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
    threads: int = 1
    """Growing threads per server: more threads, a slope known more precisely."""

    def capped(self, sequential: int, streams: int) -> Sizes:
        """The same sizes with at most `sequential` pairs and `streams` streams, one thread."""
        return replace(
            self,
            sequential=min(self.sequential, sequential),
            warmup=min(self.warmup, 2),
            streams=min(self.streams, streams),
            threads=1,
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
    turn_latencies: list[list[float]] = field(default_factory=list)
    """Per growing thread, each turn's latency."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the per-turn latencies rounded to 0.1 ms)."""
        data = asdict(self)
        data["turn_latencies"] = [[round(v, 1) for v in t] for t in self.turn_latencies]
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


@dataclass
class _Lane:
    """One server under measurement: its target, its client and its figures."""

    target: Target
    client: Any
    result: ColumnResult


def _rounds(lanes: Sequence[_Lane], count: int) -> Iterator[tuple[int, list[_Lane]]]:
    """`count` rounds over `lanes`, the order reversed every other round (no lane always first)."""
    for n in range(count):
        yield n, list(lanes) if n % 2 == 0 else list(reversed(lanes))


async def _sequential(lanes: Sequence[_Lane], sizes: Sizes) -> None:
    latencies: dict[str, list[float]] = {lane.result.label: [] for lane in lanes}
    for n, order in _rounds(lanes, sizes.warmup + sizes.sequential):
        for lane in order:
            elapsed = await _create_and_wait(lane.client, f"hello {n}")
            if n >= sizes.warmup:
                latencies[lane.result.label].append(elapsed)
    for lane in lanes:
        measured = latencies[lane.result.label]
        lane.result.create_wait_p50 = percentile(measured, 50)
        lane.result.create_wait_p99 = percentile(measured, 99)
        lane.result.sequential_samples = len(measured)


async def _growing(lanes: Sequence[_Lane], sizes: Sizes) -> None:
    threads: dict[str, list[str]] = {}
    for lane in lanes:
        created = [await lane.client.threads.create() for _ in range(sizes.threads)]
        threads[lane.result.label] = [thread["thread_id"] for thread in created]
        lane.result.turn_latencies = [[] for _ in created]
    for n in range(sizes.turns * sizes.threads):  # turn by turn, each thread in turn
        turn, k = divmod(n, sizes.threads)
        # The order flips from turn to turn on every thread (and from thread to thread within
        # a turn): with an even number of threads, flipping on `n` alone would put the same
        # server first on a given thread at every turn.
        order = list(lanes) if (turn + k) % 2 == 0 else list(reversed(lanes))
        text = f"turn {turn + 1}"
        for lane in order:
            started = time.perf_counter()
            values = await lane.client.runs.wait(
                threads[lane.result.label][k], _ASSISTANT, input=_message(text)
            )
            lane.result.turn_latencies[k].append((time.perf_counter() - started) * 1000)
            _check_answer(values, text)
    for lane in lanes:
        result, series = lane.result, lane.result.turn_latencies
        result.turns_p50 = statistics.median(v for s in series for v in s[-sizes.window :])
        result.turns_window = f"{sizes.turns - min(sizes.window, sizes.turns) + 1}-{sizes.turns}"
        result.growth_ms_per_turn = growth_fit(series).slope


@dataclass(frozen=True)
class GrowthFit:
    """A least-squares line through (turn, latency) points (ms per turn)."""

    slope: float
    standard_error: float
    """The slope's standard error."""


def growth_fit(series: Sequence[Sequence[float]]) -> GrowthFit:
    """One slope through every series' points (turn 1, 2, … in each), each its own intercept.

    Each series is centred on its own means first (a thread slower throughout than another
    shifts its line, not the slope, and does not count as noise). The standard error is the
    textbook one (residual variance over the spread of the turns, n - series - 1 degrees of
    freedom); it is 0 when no degree of freedom is left.
    """
    spread = cross = 0.0
    centred: list[tuple[list[float], list[float]]] = []
    for s in series:
        if len(s) < 2:
            continue
        turns = [t - (len(s) + 1) / 2 for t in range(1, len(s) + 1)]
        mean = statistics.fmean(s)
        values = [float(v) - mean for v in s]
        centred.append((turns, values))
        spread += sum(t * t for t in turns)
        cross += sum(t * v for t, v in zip(turns, values, strict=True))
    if not spread:
        return GrowthFit(0.0, 0.0)
    slope = cross / spread
    freedom = sum(len(turns) for turns, _ in centred) - len(centred) - 1
    if freedom < 1:
        return GrowthFit(slope, 0.0)
    residual = sum(
        (v - slope * t) ** 2
        for turns, values in centred
        for t, v in zip(turns, values, strict=True)
    )
    return GrowthFit(slope, (residual / freedom / spread) ** 0.5)


def paired_growth(
    column: Sequence[Sequence[float]], base: Sequence[Sequence[float]]
) -> GrowthFit | None:
    """The growth of `column`'s latency minus `base`'s, turn by turn (same thread, same turn).

    The two servers were measured back to back at each turn, so a drift in the machine's
    speed falls on both and mostly cancels in the difference: its slope says whether one
    grows faster than the other far more precisely than two separate slopes do. None when
    the series do not match.
    """
    if [len(s) for s in column] != [len(s) for s in base] or not column:
        return None
    return growth_fit(
        [[a - b for a, b in zip(s, t, strict=True)] for s, t in zip(column, base, strict=True)]
    )


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


@dataclass
class _Load:
    """What one lane's clients did over its blocks of the concurrent phase."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    rss: list[int] = field(default_factory=list)


async def _load_block(lane: _Lane, clients: Sequence[Any], seconds: float, load: _Load) -> None:
    with RssSampler(lane.target.pid) as rss:
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(
            *(
                _client_loop(c, n, deadline, load.latencies, load.errors)
                for n, c in enumerate(clients)
            )
        )
        load.seconds += time.perf_counter() - started
    load.rss.extend(rss.samples)


async def _concurrent(lanes: Sequence[_Lane], sizes: Sizes) -> None:
    from langgraph_sdk import get_client

    blocks = CONCURRENT_BLOCKS if len(lanes) > 1 else 1
    clients = {
        lane.result.label: [
            get_client(url=lane.target.url, api_key=None) for _ in range(sizes.clients)
        ]
        for lane in lanes
    }
    loads = {lane.result.label: _Load() for lane in lanes}
    for _, order in _rounds(lanes, blocks):
        for lane in order:
            label = lane.result.label
            await _load_block(lane, clients[label], sizes.seconds / blocks, loads[label])
    for lane in lanes:
        for client in clients[lane.result.label]:
            await client.aclose()
        load, result = loads[lane.result.label], lane.result
        result.concurrent_requests = len(load.latencies)
        result.concurrent_errors = len(load.errors)
        result.requests_per_second = len(load.latencies) / load.seconds
        result.concurrent_p50 = percentile(load.latencies, 50)
        _rss(result, load.rss, lane.target.pid)


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


async def _streaming(lanes: Sequence[_Lane], sizes: Sizes) -> None:
    firsts: dict[str, list[float]] = {lane.result.label: [] for lane in lanes}
    for n, order in _rounds(lanes, sizes.streams):
        for lane in order:
            firsts[lane.result.label].append(await _first_event(lane.client, n))
    for lane in lanes:
        lane.result.stream_first_event_p50 = percentile(firsts[lane.result.label], 50)
        lane.result.stream_samples = len(firsts[lane.result.label])


async def _first_event(client: Any, n: int) -> float:
    thread_id = (await client.threads.create())["thread_id"]
    started = time.perf_counter()
    first = None
    async for _part in client.runs.stream(thread_id, _ASSISTANT, input=_message(f"stream {n}")):
        if first is None:
            first = (time.perf_counter() - started) * 1000
    if first is None:
        raise RuntimeError(f"runs.stream on {thread_id} sent no event")
    return first


async def ameasure(targets: Sequence[Target], sizes: Sizes) -> list[ColumnResult]:
    """Every phase against every target, in order: sequential, growing, streaming, concurrent.

    Within a phase the targets take turns request by request (turn by turn for the growing
    thread, stream by stream), the order reversed every other round; the concurrent phase
    alternates in `CONCURRENT_BLOCKS` blocks. So a drift in the machine's speed lands on every
    target alike instead of on whichever was measured later.
    """
    from langgraph_sdk import get_client

    async with contextlib.AsyncExitStack() as stack:
        lanes = []
        for target in targets:
            client = await stack.enter_async_context(get_client(url=target.url, api_key=None))
            lanes.append(_Lane(target, client, ColumnResult(target.label)))
        await _sequential(lanes, sizes)
        await _growing(lanes, sizes)
        await _streaming(lanes, sizes)
    await _concurrent(lanes, sizes)
    return [lane.result for lane in lanes]


def measure(targets: Sequence[Target], sizes: Sizes) -> list[ColumnResult]:
    """`ameasure` in a fresh event loop."""
    return asyncio.run(ameasure(targets, sizes))
