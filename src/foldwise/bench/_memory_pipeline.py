"""Memory write-queue figures: enqueue latency, worker throughput, enqueue-to-visible latency.

`run_memory_pipeline_benchmark` measures, on one fresh database (a SQLite file in WAL mode by
default):

- **enqueue** p50/p95/max of `SqlMemoryOutbox.enqueue` (the only memory work on the answer's
  path), and of `aenqueue` from a running event loop (one thread hop more);
- **throughput**: slices applied per second by one `MemoryWorker` with the rules extractor
  (each slice its own batch: one claim, one extraction, one fact write, one log write, one
  completion);
- **end to end**: from `enqueue` (debounce 0) to the fact being listed by another connection,
  with a background worker: woken by the producer (`MemoryWorker.wake`), and not woken (its
  idle poll, `poll_seconds`, then dominates).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise.memory import (
    MemoryManager,
    MemoryOutbox,
    MemoryWorker,
    namespace_for,
    open_backend,
    open_outbox,
)

__all__ = ["LatencyFigures", "MemoryPipelineReport", "run_memory_pipeline_benchmark"]

_CITIES = ("Munich", "Berlin", "Paris", "Lisbon", "Oslo", "Tokyo", "Austin", "Porto")


@dataclass(frozen=True)
class LatencyFigures:
    """Milliseconds over `n` calls."""

    n: int
    p50_ms: float
    p95_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> LatencyFigures:
        """The figures of `seconds` samples."""
        ms = sorted(s * 1000 for s in seconds)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return cls(len(ms), round(statistics.median(ms), 3), round(p95, 3), round(ms[-1], 3))


@dataclass(frozen=True)
class MemoryPipelineReport:
    """What `run_memory_pipeline_benchmark` measured."""

    backend: str
    enqueue_sync: LatencyFigures
    enqueue_async: LatencyFigures
    worker_slices_per_second: float
    end_to_end: LatencyFigures
    """Enqueue, then `MemoryWorker.wake` (what an in-process producer does)."""
    end_to_end_polling: LatencyFigures
    """Enqueue only: the worker finds the row at its next poll (another process enqueued)."""
    poll_seconds: float

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON output."""
        return asdict(self)


def _slice(n: int, text: str) -> list[BaseMessage]:
    return [HumanMessage(content=text, id=f"q{n}"), AIMessage(content="Noted.", id=f"a{n}")]


def _enqueue_sync(outbox: MemoryOutbox, count: int) -> list[float]:
    samples = []
    for n in range(count):
        messages = _slice(n, f"I live in {_CITIES[n % len(_CITIES)]}")
        ns = namespace_for(f"lat{n % 50}")
        start = time.perf_counter()
        outbox.enqueue(ns, messages, thread_id=f"t{n % 50}", debounce_seconds=3600)
        samples.append(time.perf_counter() - start)
    return samples


async def _enqueue_async(outbox: MemoryOutbox, count: int) -> list[float]:
    samples = []
    for n in range(count):
        messages = _slice(100_000 + n, f"I like tea {n}")
        ns = namespace_for(f"alat{n % 50}")
        start = time.perf_counter()
        await outbox.aenqueue(ns, messages, thread_id=f"t{n % 50}", debounce_seconds=3600)
        samples.append(time.perf_counter() - start)
    return samples


def _throughput(manager: MemoryManager, outbox: MemoryOutbox, count: int) -> float:
    for n in range(count):
        outbox.enqueue(
            namespace_for(f"tp{n}"),
            _slice(200_000 + n, f"I live in {_CITIES[n % 8]}"),
            thread_id="t",
        )
    worker = MemoryWorker(manager, outbox, worker_id="bench")
    start = time.perf_counter()
    handled = 0
    while worker.run_once():
        handled += 1
    return round(handled / (time.perf_counter() - start), 1)


def _end_to_end(
    manager: MemoryManager, outbox: MemoryOutbox, count: int, poll_seconds: float, *, wake: bool
) -> list[float]:
    worker = MemoryWorker(manager, outbox, worker_id="bench-bg", poll_seconds=poll_seconds)
    worker.start()
    samples = []
    try:
        for n in range(count):
            time.sleep(poll_seconds * (1 + n % 7 / 7))  # the worker is idle, mid-poll
            ns = namespace_for(f"e2e{int(wake)}-{n}")
            start = time.perf_counter()
            outbox.enqueue(ns, _slice(300_000 + n, "I live in Oslo"), thread_id="t")
            if wake:
                worker.wake()
            while not manager.list(ns, status="active"):
                time.sleep(0.0005)
            samples.append(time.perf_counter() - start)
    finally:
        worker.stop(timeout=30)
    return samples


def run_memory_pipeline_benchmark(
    *,
    url: str | None = None,
    enqueues: int = 500,
    slices: int = 200,
    trials: int = 30,
    poll_seconds: float = 0.05,
) -> MemoryPipelineReport:
    """Measure the memory write queue (see the module docstring).

    Args:
        url: A fresh memory database; default a SQLite file in a temporary directory.
        enqueues: Enqueue calls timed (sync, then as many async).
        slices: Slices the worker applies for the throughput figure.
        trials: Enqueue-to-visible measurements.
        poll_seconds: The background worker's idle poll.
    """
    with tempfile.TemporaryDirectory(prefix="foldwise-pipeline-") as tmp:
        url = url or f"sqlite:///{Path(tmp) / 'memory.db'}"
        manager = MemoryManager(open_backend(url))
        outbox = open_outbox(url)
        manager.setup()
        outbox.setup()
        try:
            sync = _enqueue_sync(outbox, enqueues)
            async_ = asyncio.run(_enqueue_async(outbox, enqueues))
            # the timed rows are debounced an hour: they stay out of the worker's way
            rate = _throughput(manager, outbox, slices)
            e2e = _end_to_end(manager, outbox, trials, poll_seconds, wake=True)
            polled = _end_to_end(manager, outbox, trials, poll_seconds, wake=False)
        finally:
            outbox.close()
            manager.close()
    return MemoryPipelineReport(
        backend=url.split(":", 1)[0],
        enqueue_sync=LatencyFigures.of(sync),
        enqueue_async=LatencyFigures.of(async_),
        worker_slices_per_second=rate,
        end_to_end=LatencyFigures.of(e2e),
        end_to_end_polling=LatencyFigures.of(polled),
        poll_seconds=poll_seconds,
    )
