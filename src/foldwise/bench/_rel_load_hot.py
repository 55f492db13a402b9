"""Load L2: one hot thread, many clients contending for it.

**reject** (the default `multitask_strategy`): `rounds` bursts; in each, every client posts a
run on the same thread at once (one in five through `/runs/stream`) and the stub holds each
answer `DELAY` seconds, so the bursts overlap a running run. Expected: at least one run of
each burst proceeds, every other request gets 409 with a `Retry-After` of whole seconds
between 1 and the lease TTL (30 s), no run record or transcript entry is left by a refused
request, and the thread's runs never overlap (their records' `created_at`..`updated_at`
intervals, and the stub's count of model calls in flight on the thread, which
`_rel_load._backend_rows` checks once the stub has stopped).

**enqueue**: every client posts one run with `multitask_strategy: "enqueue"` on a second
thread at once. Expected: all accepted and answered with their own echo, every user message in
the transcript once (I1), and the answers in the transcript in the order of the inputs (the
queue is first in, first out).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from datetime import datetime
from typing import Any

import httpx

from foldwise.bench._rel_load_client import (
    Outcome,
    Tally,
    check_thread,
    create_thread,
    new_client,
    run_turn,
)
from foldwise.bench._reliability import AreaResult
from foldwise.bench._serve import ServeProcess

__all__ = ["DELAY", "run_hot"]

DELAY = 0.5
"""Seconds the stub holds each answer on the contended thread (reject phase)."""
ENQUEUE_DELAY = 0.02
LEASE_TTL = 30


def _retry_after(outcome: Outcome, tally: Tally, retry_afters: Counter[str]) -> None:
    value = outcome.headers.get("retry-after")
    retry_afters[str(value)] += 1
    if value is None:
        tally.find("retry-after", f"409 without Retry-After: {outcome.body[:300]}")
    elif not value.isdigit() or not 1 <= int(value) <= LEASE_TTL:
        tally.find("retry-after", f"409 with Retry-After {value!r} (want 1..{LEASE_TTL} s)")


async def _runs(client: httpx.AsyncClient, tally: Tally, thread_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/threads/{thread_id}/runs", params={"limit": 1000})
    if response.status_code != 200:
        tally.find("audit", f"GET runs → {response.status_code}: {response.text[:300]}")
        return []
    return list(response.json())


def _check_serial(tally: Tally, runs: list[dict[str, Any]], phase: str) -> None:
    spans = sorted(
        (datetime.fromisoformat(r["created_at"]), datetime.fromisoformat(r["updated_at"]), r)
        for r in runs
        if r["kind"] == "run"
    )
    for (_, end, before), (start, _, after) in itertools.pairwise(spans):
        if start < end:
            tally.find(
                "one-at-a-time",
                f"{phase}: run {after['run_id']} started at {start.isoformat()} before run "
                f"{before['run_id']} ended at {end.isoformat()}",
            )
            return


async def _reject_phase(
    clients: list[httpx.AsyncClient], tally: Tally, rounds: int, notes: list[str]
) -> int:
    thread_id = await create_thread(clients[0], tally)
    if thread_id is None:
        return 0
    accepted: list[str] = []
    refused: list[str] = []
    retry_afters: Counter[str] = Counter()
    proceeded: Counter[int] = Counter()
    for round_ in range(rounds):
        texts = [
            f"L2 reject round {round_} client {c} hot=reject delay={DELAY}"
            for c in range(len(clients))
        ]
        outcomes = await asyncio.gather(
            *(
                run_turn(c, tally, thread_id, t, stream=n % 5 == 4, expect=(200, 409))
                for n, (c, t) in enumerate(zip(clients, texts, strict=True))
            )
        )
        ok = 0
        for text, outcome in zip(texts, outcomes, strict=True):
            if outcome is None:
                continue
            if outcome.status == 200:
                ok += 1
                accepted.append(text)
            elif outcome.status == 409:
                refused.append(text)
                _retry_after(outcome, tally, retry_afters)
        proceeded[ok] += 1
        if ok == 0:
            tally.find("one-proceeds", f"round {round_}: no run of {len(texts)} proceeded")
    runs = await _runs(clients[0], tally, thread_id)
    _check_serial(tally, runs, "reject")
    if len([r for r in runs if r["kind"] == "run"]) != len(accepted):
        tally.find(
            "refused-recorded",
            f"reject: {len(runs)} run records for {len(accepted)} accepted runs",
        )
    await check_thread(clients[0], tally, thread_id, accepted, refused=refused)
    notes.append(
        f"reject: {rounds} bursts of {len(clients)} (answers held {DELAY} s): "
        f"{len(accepted)} proceeded, {len(refused)} got 409; runs proceeding per burst "
        f"{dict(sorted(proceeded.items()))}; Retry-After values {dict(retry_afters)}"
    )
    return len(accepted) + len(refused)


async def _enqueue_phase(clients: list[httpx.AsyncClient], tally: Tally, notes: list[str]) -> int:
    thread_id = await create_thread(clients[0], tally)
    if thread_id is None:
        return 0
    texts = [
        f"L2 enqueue client {c} hot=enqueue delay={ENQUEUE_DELAY}" for c in range(len(clients))
    ]
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(
            run_turn(c, tally, thread_id, t, stream=n % 5 == 4, strategy="enqueue")
            for n, (c, t) in enumerate(zip(clients, texts, strict=True))
        )
    )
    elapsed = time.perf_counter() - started
    accepted = [t for t, o in zip(texts, outcomes, strict=True) if o and o.status == 200]
    audit = await check_thread(clients[0], tally, thread_id, accepted, ordered=False)
    if audit is not None:
        inputs = [t for t in audit.user_texts if t in set(texts)]
        answered = [a.removeprefix("re: ") for a in audit.ai_texts]
        if answered != inputs:
            first = next(
                (i for i, (a, b) in enumerate(zip(answered, inputs, strict=False)) if a != b),
                min(len(answered), len(inputs)),
            )
            tally.find(
                "in-order",
                f"enqueue: answer {first} in /transcript is to {answered[first : first + 1]} "
                f"but input {first} is {inputs[first : first + 1]} ({len(answered)} answers, "
                f"{len(inputs)} inputs)",
            )
    runs = await _runs(clients[0], tally, thread_id)
    statuses = Counter(r["status"] for r in runs)
    if statuses.get("success", 0) != len(texts):
        tally.find("all-complete", f"enqueue: run statuses {dict(statuses)} for {len(texts)}")
    notes.append(
        f"enqueue: {len(accepted)} of {len(texts)} accepted and answered in {elapsed:.1f} s; "
        f"run statuses {dict(statuses)}"
    )
    return len(texts)


def run_hot(server: ServeProcess, clients: int, rounds: int, seed: int) -> AreaResult:
    """L2 on `server`: the reject bursts, then the enqueue burst (see the module docstring)."""
    del seed  # nothing random: every client contends in every burst
    tally = Tally("L2")
    notes: list[str] = []
    started = time.perf_counter()

    async def main() -> int:
        async with contextlib.AsyncExitStack() as stack:
            pool = [await stack.enter_async_context(new_client(server.url)) for _ in range(clients)]
            cases = await _reject_phase(pool, tally, rounds, notes)
            cases += await _enqueue_phase(pool, tally, notes)
            return cases

    cases = asyncio.run(main())
    notes += [
        f"statuses {dict(sorted(tally.statuses.items()))}",
        tally.figures("wait"),
        tally.figures("stream"),
    ]
    return AreaResult(
        area="L2",
        cases=cases,
        violations=list(tally.findings),
        command="",
        seconds=time.perf_counter() - started,
        notes=notes,
    )
