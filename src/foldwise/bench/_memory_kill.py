"""The memory kill test: SIGKILL the producer + worker at seeded points, restart, count losses.

`run_memory_kill_benchmark` starts the fork server `foldwise.bench._memory_kill_child` once
and runs rounds against one database until `points` processes were actually SIGKILLed: each
round enqueues a new chunk of the seeded workload (and re-enqueues any chunk a killed producer
did not confirm), then works the queue; one process of the round dies at a seeded crash point
(`POINTS`, and which hit of it). A last round without a crash drains the queue. Then it
checks, from the database alone:

- **applied**: every enqueued update (a user statement, or a compaction span whose
  compaction committed) left its fact in its slot (active or, after a later value, superseded);
- **duplicates**: the same slot and text active twice;
- **half-applied supersessions**: a superseded fact whose successor is missing, or a
  single-valued slot with two active facts;
- **uncommitted**: a fact from a compaction span whose compaction never committed;
- **history**: every fact (text and status, active or closed) equals those of a crash-free
  sequential reference run: a replay that re-applied a slice (a twin in the history) shows
  here (confidences are not compared: the rules extractor's depend on what a batch merged);
- the queue holds nothing live and no dead letters.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldwise.bench._memory_kill_child import POINTS, USERS, Slice, commit_verdict, workload
from foldwise.memory import Fact, MemoryManager, namespace_for, open_backend, open_outbox
from foldwise.memory._plan import same_value

__all__ = ["MemoryKillReport", "run_memory_kill_benchmark"]

_SINGLE_VALUED = {("user", "home_city"), ("user", "name")}
_HITS = {"enqueue": 8, "debounce": 2}
_DEFAULT_HITS = 4
_FIGURES = (
    "updates",
    "applied",
    "duplicates",
    "half_applied",
    "uncommitted_applied",
    "state_mismatches",
    "live_rows",
    "dead_letters",
)


@dataclass(frozen=True)
class MemoryKillReport:
    """What the kill test measured (see the module docstring)."""

    backend: str
    workers: int
    points: int
    """Processes SIGKILLed (each at one seeded crash point)."""
    rounds: int
    updates: int
    """Updates that had to be applied (run slices, committed compaction spans)."""
    applied: int
    duplicates: int
    half_applied: int
    uncommitted_applied: int
    state_mismatches: int
    """Namespaces whose facts (texts and statuses) differ from the reference."""
    live_rows: int
    dead_letters: int
    seconds: float
    kills_by_point: dict[str, int] = field(default_factory=dict)

    @property
    def applied_percent(self) -> float:
        """Share of the updates applied."""
        return 100.0 * self.applied / self.updates if self.updates else 100.0

    @property
    def ok(self) -> bool:
        """Everything applied once, nothing half-applied, nothing from an uncommitted span."""
        return (
            self.applied == self.updates
            and self.duplicates == self.half_applied == self.uncommitted_applied == 0
            and self.state_mismatches == self.live_rows == self.dead_letters == 0
        )

    def as_dict(self) -> dict[str, Any]:
        """The figures, for JSON output."""
        return {
            "backend": self.backend,
            "workers": self.workers,
            "points": self.points,
            "rounds": self.rounds,
            "updates": self.updates,
            "applied": self.applied,
            "applied_percent": round(self.applied_percent, 2),
            "duplicates": self.duplicates,
            "half_applied": self.half_applied,
            "uncommitted_applied": self.uncommitted_applied,
            "state_mismatches": self.state_mismatches,
            "live_rows": self.live_rows,
            "dead_letters": self.dead_letters,
            "seconds": round(self.seconds, 2),
            "kills_by_point": dict(self.kills_by_point),
        }


class _Server:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "foldwise.bench._memory_kill_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def round(self, spec: dict[str, Any]) -> list[int]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the memory kill-test server died")
        return [int(s) for s in json.loads(line)["statuses"]]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def _confirmed(ledger: Path) -> set[int]:
    if not ledger.exists():
        return set()
    return {int(line) for line in ledger.read_text("utf-8").split()}


def _expected(item: Slice) -> bool:
    return item.commit_ref is None or commit_verdict(item.commit_ref)


def run_memory_kill_benchmark(
    points: int = 200,
    *,
    url: str | None = None,
    workers: int = 1,
    seed: int = 0,
    lease_seconds: float = 0.5,
    debounce_seconds: float = 0.02,
) -> MemoryKillReport:
    """Kill the memory writer at `points` seeded points and check what survived.

    Args:
        points: How many processes to SIGKILL.
        url: The memory database (a fresh one: ``sqlite:///…`` or ``postgresql://…?schema=``);
            default a SQLite file in a temporary directory.
        workers: Worker processes per round (each also a producer; use 2 on PostgreSQL).
        seed: Picks each round's crash point and hit.
        lease_seconds: The workers' lease (a killed worker's batch waits this long).
        debounce_seconds: The producers' debounce.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldwise-kill-") as tmp:
        url = url or f"sqlite:///{Path(tmp) / 'memory.db'}"
        ledger = Path(tmp) / "ledger.txt"
        base = {"url": url, "workers": workers, "lease": lease_seconds, "ledger": str(ledger)}
        base["debounce"] = debounce_seconds
        rng = random.Random(seed)
        kills: Counter[str] = Counter()
        chunks = rounds = 0
        server = _Server()
        try:
            while sum(kills.values()) < points and rounds < 4 * points + 10:
                point = rng.choice(POINTS)
                kill = {"point": point, "hit": rng.randint(1, _HITS.get(point, _DEFAULT_HITS))}
                kill["proc"] = rng.randrange(workers)
                todo = [c for c in range(chunks + 1) if c not in _confirmed(ledger)]
                chunks += 1
                statuses = server.round({**base, "chunks": todo, "kill": kill})
                rounds += 1
                _check_statuses(statuses, allow_kill=True)
                kills[point] += sum(1 for s in statuses if s == -9)
            todo = [c for c in range(chunks) if c not in _confirmed(ledger)]
            _check_statuses(server.round({**base, "chunks": todo, "kill": None}), allow_kill=False)
        finally:
            server.close()
        report = _verify(url, chunks, ledger)
    return MemoryKillReport(
        backend=url.split(":", 1)[0],
        workers=workers,
        points=sum(kills.values()),
        rounds=rounds,
        seconds=time.perf_counter() - started,
        kills_by_point=dict(sorted(kills.items())),
        **report,
    )


def _check_statuses(statuses: list[int], *, allow_kill: bool) -> None:
    bad = [s for s in statuses if s != 0 and not (allow_kill and s == -9)]
    if bad:
        raise RuntimeError(f"a kill-test process failed (exit statuses {statuses})")


def _verify(url: str, chunks: int, ledger: Path) -> dict[str, int]:
    missing = set(range(chunks)) - _confirmed(ledger)
    if missing:
        raise RuntimeError(f"chunks never confirmed as enqueued: {sorted(missing)}")
    slices = [item for chunk in range(chunks) for item in workload(chunk)]
    backend, outbox = open_backend(url), open_outbox(url)
    backend.setup()
    outbox.setup()
    try:
        facts = {user: backend.list_facts(namespace_for(f"user{user}")) for user in range(USERS)}
        status = outbox.status()
    finally:
        backend.close()
        outbox.close()
    reference = _reference(slices)
    counts = Counter[str]()
    for item in slices:
        present = any(
            f.slot == item.slot and same_value(f.text, item.text) for f in facts[item.user]
        )
        if _expected(item):
            counts["updates"] += 1
            counts["applied"] += present
        else:
            counts["uncommitted_applied"] += present
    for user, stored in facts.items():
        counts["duplicates"] += _duplicates(stored)
        counts["half_applied"] += _half_applied(stored)
        counts["state_mismatches"] += _history(stored) != reference[user]
    counts["live_rows"] = status.live
    counts["dead_letters"] = status.counts.get("dead", 0)
    return {key: counts[key] for key in _FIGURES}


def _history(facts: list[Fact]) -> Counter[tuple[Any, ...]]:
    return Counter((f.slot, f.text.casefold(), f.status) for f in facts)


def _duplicates(facts: list[Fact]) -> int:
    seen = Counter((f.slot, f.text.casefold()) for f in facts if f.status == "active")
    return sum(n - 1 for n in seen.values() if n > 1)


def _half_applied(facts: list[Fact]) -> int:
    ids = {f.id for f in facts}
    broken = sum(
        1
        for f in facts
        if f.status == "superseded" and (f.superseded_by is None or f.superseded_by not in ids)
    )
    active = Counter(f.slot for f in facts if f.status == "active" and f.slot in _SINGLE_VALUED)
    return broken + sum(n - 1 for n in active.values() if n > 1)


def _reference(slices: list[Slice]) -> dict[int, Counter[tuple[Any, ...]]]:
    """The facts of a crash-free run: each thread's updates applied in order, once."""
    manager = MemoryManager(open_backend("memory://"))
    for item in slices:
        if _expected(item):
            manager.remember(item.namespace, item.messages())
    return {user: _history(manager.list(namespace_for(f"user{user}"))) for user in range(USERS)}
