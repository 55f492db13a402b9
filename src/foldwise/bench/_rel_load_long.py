"""Load L3: a few long threads, each run turn after turn, compacting every few turns.

`threads` clients run concurrently, each `turns` turns on its own thread (one in ten through
`/runs/stream`). Every user message asks the stub for a 600-character answer, so with the
harness's window (compaction above 1,500 tokens, keep 2 messages) a thread compacts every few
turns. Expected: every request 200 with its own echo; afterwards each thread's transcript
holds all its user messages in order (I1) and every message of its state (I1b), it has
compaction receipts, and as many compaction markers as receipts (no half-recorded
compaction, I3 as seen from outside); the server's RSS is flat. Figures: per-turn latency
p50/p99 of the first and the last tenth of the turns, and the growth between them.
"""

from __future__ import annotations

import asyncio
import time

from foldwise.bench._rel_load_client import Tally, check_thread, create_thread, new_client, run_turn
from foldwise.bench._rel_load_serve import flat_rss
from foldwise.bench._reliability import AreaResult
from foldwise.bench._serve import RssSampler, ServeProcess, percentile

__all__ = ["ANSWER_PAD", "run_long"]

ANSWER_PAD = 600
_USER_FILLER = " Please keep this turn in mind with the rest of the conversation so far."


async def _long_thread(
    url: str, tally: Tally, number: int, turns: int, latencies: list[list[float]]
) -> tuple[str | None, list[str]]:
    accepted: list[str] = []
    async with new_client(url) as client:
        thread_id = await create_thread(client, tally)
        if thread_id is None:
            return None, accepted
        for turn in range(turns):
            text = f"L3 thread {number} turn {turn} pad={ANSWER_PAD}.{_USER_FILLER}"
            began = time.perf_counter()
            outcome = await run_turn(client, tally, thread_id, text, stream=turn % 10 == 9)
            latencies[turn].append(time.perf_counter() - began)
            if outcome is not None and outcome.status == 200:
                accepted.append(text)
    return thread_id, accepted


def _span(latencies: list[list[float]], start: int, stop: int) -> tuple[float, float]:
    values = [v for per_turn in latencies[start:stop] for v in per_turn]
    return percentile(values, 50) * 1000, percentile(values, 99) * 1000


def run_long(server: ServeProcess, threads: int, turns: int, seed: int) -> AreaResult:
    """L3 on `server` (see the module docstring)."""
    del seed  # nothing random: the turns are the same every run
    tally = Tally("L3")
    latencies: list[list[float]] = [[] for _ in range(turns)]
    samples: list[int] = []
    notes: list[str] = []
    started = time.perf_counter()

    async def main() -> float:
        with RssSampler(server.pid) as rss:
            began = time.perf_counter()
            results = await asyncio.gather(
                *(_long_thread(server.url, tally, n, turns, latencies) for n in range(threads))
            )
            elapsed = time.perf_counter() - began
        samples.extend(rss.samples)
        receipts = markers = 0
        async with new_client(server.url) as client:
            for thread_id, accepted in results:
                if thread_id is None:
                    continue
                audit = await check_thread(client, tally, thread_id, accepted)
                if audit is None:
                    continue
                receipts += audit.receipts
                markers += audit.markers
                if audit.receipts == 0:
                    tally.find("compacted", f"thread {thread_id}: no compaction in {turns} turns")
                if audit.markers != audit.receipts:
                    tally.find(
                        "I3",
                        f"thread {thread_id}: {audit.markers} compaction markers in /transcript "
                        f"but {audit.receipts} receipts",
                    )
                notes.append(
                    f"thread {thread_id[:8]}: {len(audit.user_texts)} user messages in "
                    f"/transcript, {audit.receipts} compactions, {audit.state_messages} "
                    "messages in the state"
                )
        notes.insert(0, f"{receipts} compactions and {markers} markers over {threads} threads")
        return elapsed

    elapsed = asyncio.run(main())
    tenth = max(1, turns // 10)
    early, late = _span(latencies, 0, tenth), _span(latencies, turns - tenth, turns)
    per_turn = (late[0] - early[0]) / max(1, turns - tenth)
    rss_note, rss_finding = flat_rss(samples, "L3")
    figures = [
        f"{threads} threads × {turns} turns in {elapsed:.1f} s "
        f"({tally.requests / elapsed:.1f} requests/s), statuses "
        f"{dict(sorted(tally.statuses.items()))}",
        f"per-turn latency, turns 1–{tenth}: p50 {early[0]:.1f} ms, p99 {early[1]:.1f} ms; "
        f"turns {turns - tenth + 1}–{turns}: p50 {late[0]:.1f} ms, p99 {late[1]:.1f} ms "
        f"(growth {per_turn:+.3f} ms per turn at p50)",
        rss_note,
    ]
    return AreaResult(
        area="L3",
        cases=threads * turns,
        violations=[*tally.findings, *([rss_finding] if rss_finding else [])],
        command="",
        seconds=time.perf_counter() - started,
        notes=figures + notes,
    )
