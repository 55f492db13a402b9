"""Reliability area `load` (issue 15, item 3): many threads, one hot thread, long threads.

Against a real `foldwise serve` subprocess (SQLite, and PostgreSQL when a URL is given) whose
model is the OpenAI stub in a child process (`foldwise.bench._rel_load_stub`, ~1 ms answers,
a 6,000-token window that compacts above 1,500 tokens), driven by asyncio clients, each with
its own `httpx.AsyncClient` (one keep-alive connection per simulated user). The load
generator, the stub and the server share this machine's cores.

- **L1 many threads**: `clients` concurrent clients for `seconds`; each creates a thread and
  runs 1–4 turns on it (one in five through `/runs/stream`, the rest `/runs/wait`), then
  starts a new thread. Expected: every request 2xx with the echo of its own message; afterwards
  every thread's `/transcript` holds each accepted message in order (I1) and every message of
  its state (I1b). Figures: requests/s, p50/p99 per request kind, the server's RSS every
  second; RSS is flat when the last third's median is within 10 % or 20 MiB of the middle
  third's (`flat_rss`).
- **L2 one hot thread** (`_rel_load_hot`): bursts of contending runs on one thread with the
  default strategy (one proceeds, the rest 409 with a sane `Retry-After`), then the same
  clients with `multitask_strategy: "enqueue"` (all accepted, all run, in order).
- **L3 long threads** (`_rel_load_long`): a few threads of many turns each with compactions:
  per-turn latency early vs late, RSS flat, transcript complete, compactions recorded.

Any 5xx, unexpected status, wrong answer or broken invariant is a `Finding` with the response
body; so is a traceback in the server's log or a non-zero exit. The gateway has no overload
shedding (no 429/503 under load), so a 5xx under load is always a violation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from foldwise.bench._rel_load_client import Tally, check_thread, create_thread, new_client, run_turn
from foldwise.bench._rel_load_hot import run_hot
from foldwise.bench._rel_load_long import run_long
from foldwise.bench._rel_load_serve import flat_rss, fresh_postgres, served
from foldwise.bench._reliability import AreaOptions, AreaResult, Finding, area_command
from foldwise.bench._serve import RssSampler, ServeProcess, stub_process

__all__ = ["LoadSizes", "run", "run_backends", "run_many_threads"]

BACKENDS = ("sqlite", "postgres")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadSizes:
    """How big each scenario is (the issue's sizes in full, a CI-sized sample otherwise)."""

    l1_clients: int
    l1_seconds: float
    l2_clients: int
    l2_rounds: int
    l3_threads: int
    l3_turns: int

    @classmethod
    def of(cls, options: AreaOptions) -> LoadSizes:
        """Full: 200 clients × 60 s, 50 contenders × 10 bursts, 3 threads × 1,000 turns."""
        if options.full:
            return cls(200, 60.0, 50, 10, 3, 1000)
        return cls(20, 5.0, 10, 3, 2, 30)


async def _many_threads_client(
    url: str,
    tally: Tally,
    number: int,
    deadline: float,
    rng: random.Random,
    sent: dict[str, list[str]],
) -> None:
    async with new_client(url) as client:
        threads = 0
        while time.monotonic() < deadline:
            thread_id = await create_thread(client, tally)
            if thread_id is None:
                await asyncio.sleep(0.1)
                continue
            threads += 1
            accepted = sent.setdefault(thread_id, [])
            for turn in range(rng.randint(1, 4)):
                if time.monotonic() >= deadline:
                    break
                text = f"L1 client {number} thread {threads} turn {turn}"
                outcome = await run_turn(client, tally, thread_id, text, stream=rng.random() < 0.2)
                if outcome is not None and outcome.status == 200:
                    accepted.append(text)


async def _audit_all(url: str, tally: Tally, sent: dict[str, list[str]]) -> None:
    queue = list(sent.items())

    async def worker() -> None:
        async with new_client(url) as client:
            while queue:
                thread_id, accepted = queue.pop()
                await check_thread(client, tally, thread_id, accepted)

    await asyncio.gather(*(worker() for _ in range(8)))


def run_many_threads(server: ServeProcess, clients: int, seconds: float, seed: int) -> AreaResult:
    """L1: `clients` concurrent clients for `seconds`, then every thread audited."""
    tally = Tally("L1")
    sent: dict[str, list[str]] = {}
    samples: list[int] = []
    rng = random.Random(seed)
    started = time.perf_counter()

    async def main() -> float:
        deadline = time.monotonic() + seconds
        seeds = [rng.randrange(2**32) for _ in range(clients)]
        with RssSampler(server.pid) as rss:
            began = time.perf_counter()
            await asyncio.gather(
                *(
                    _many_threads_client(
                        server.url, tally, n, deadline, random.Random(seeds[n]), sent
                    )
                    for n in range(clients)
                )
            )
            elapsed = time.perf_counter() - began
        samples.extend(rss.samples)
        await _audit_all(server.url, tally, sent)
        return elapsed

    elapsed = asyncio.run(main())
    rss_note, rss_finding = flat_rss(samples, "L1")
    violations = [*tally.findings, *([rss_finding] if rss_finding else [])]
    turns = sum(len(v) for v in sent.values())
    notes = [
        f"{clients} clients (one httpx.AsyncClient each) × {seconds:.0f} s: "
        f"{tally.requests:,} requests "
        f"({tally.requests / elapsed:.1f}/s), {len(sent):,} threads, {turns:,} turns",
        f"statuses {dict(sorted(tally.statuses.items()))}",
        tally.figures("create"),
        tally.figures("wait"),
        tally.figures("stream"),
        rss_note,
    ]
    if tally.dropped:
        notes.append(f"{tally.dropped} more findings not listed")
    return AreaResult(
        area="L1",
        cases=tally.requests,
        violations=violations,
        command="",
        seconds=time.perf_counter() - started,
        notes=notes,
    )


@contextlib.contextmanager
def _storage(backend: str, options: AreaOptions) -> Iterator[str]:
    if backend == "sqlite":
        yield "sqlite:///data/foldwise.db"
        return
    assert options.postgres_url is not None
    with fresh_postgres(options.postgres_url) as url:
        yield url


def _backend_rows(backend: str, options: AreaOptions) -> list[AreaResult]:
    sizes = LoadSizes.of(options)
    label = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
    server_findings: list[Finding] = []
    rows: list[AreaResult] = []
    with (
        stub_process() as stub,
        _storage(backend, options) as storage_url,
        served(options.workdir / backend, stub.url, storage_url, server_findings) as server,
    ):
        rows.append(run_many_threads(server, sizes.l1_clients, sizes.l1_seconds, options.seed))
        rows.append(run_hot(server, sizes.l2_clients, sizes.l2_rounds, options.seed))
        rows.append(run_long(server, sizes.l3_threads, sizes.l3_turns, options.seed))
    hot = rows[1]
    peaks = stub.figures.get("peak", {})
    for key, peak in sorted(peaks.items()):
        hot.notes.append(f"most model calls in flight at once on the {key} thread: {peak}")
        if peak > 1:
            hot.violations.append(
                Finding(f"L2 {key}", "one-at-a-time", f"{peak} runs of one thread ran at once")
            )
    if len(peaks) < 2:
        hot.violations.append(Finding("L2", "stub-figures", f"stub figures incomplete: {peaks}"))
    names = {
        "L1": f"L1 many threads ({sizes.l1_clients} clients), {label}",
        "L2": f"L2 one hot thread ({sizes.l2_clients} clients), {label}",
        "L3": f"L3 long threads ({sizes.l3_threads} × {sizes.l3_turns} turns), {label}",
    }
    for row in rows:
        row.notes.append(
            f"load average at the end {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)"
        )
        row.area = "load " + names[row.area]
        row.command = area_command("load", options, *_pg_flag(backend))
    rows[-1].violations.extend(server_findings)  # the server's exit covers all three
    for row in rows:
        logger.info(
            "%s: %d cases, %d violations, %.0f s",
            row.area,
            row.cases,
            len(row.violations),
            row.seconds,
        )
    return rows


def _pg_flag(backend: str) -> tuple[str, ...]:
    return ("--postgres URL",) if backend == "postgres" else ()


def run_backends(options: AreaOptions, backends: Sequence[str] = BACKENDS) -> list[AreaResult]:
    """The rows of `backends` (PostgreSQL only with `options.postgres_url`; else a note row)."""
    rows: list[AreaResult] = []
    for backend in backends:
        if backend == "postgres" and options.postgres_url is None:
            rows.append(
                AreaResult(
                    area="load L1–L3, PostgreSQL",
                    cases=0,
                    violations=[],
                    command=area_command("load", options, "--postgres URL"),
                    notes=["skipped: no PostgreSQL URL (--postgres or FOLDWISE_TEST_POSTGRES)"],
                )
            )
            continue
        (options.workdir / backend).mkdir(parents=True, exist_ok=True)
        rows += _backend_rows(backend, options)
    return rows


def run(options: AreaOptions) -> list[AreaResult]:
    """The load area: L1, L2 and L3 on SQLite, then on PostgreSQL when a URL is given."""
    return run_backends(options)
