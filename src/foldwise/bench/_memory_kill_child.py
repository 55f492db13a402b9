"""The process the memory kill test SIGKILLs: producer + `MemoryWorker` with seeded crash points.

Run as ``python -m foldwise.bench._memory_kill_child``: a fork server. It imports foldwise
once, then reads one JSON round per stdin line, forks one process per worker for it, waits,
and answers one JSON line with each process's exit status (``-9``: killed). A forked process
opens its own connections, enqueues the round's chunks of the seeded workload (re-enqueueing
earlier unconfirmed chunks: enqueue is idempotent), confirms each chunk in a ledger file, then
works the queue until it is empty. At the round's crash point (``point``, ``hit``: the hit-th
time the process reaches it) it SIGKILLs itself: no ``finally``, no commit, no flush, exactly
as an external ``kill -9`` at that instant.

Crash points: ``enqueue`` (a row committed, its chunk not yet confirmed), ``debounce`` (the
worker waiting for rows not yet due or leased elsewhere), ``claim`` (a batch leased, nothing
extracted), ``extraction`` (candidates extracted, nothing written), ``apply`` (the facts'
transaction committed, the log and completion not), ``before_completion`` (applied and
logged, the queue row still claimed) and ``completion`` (the row done).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise._steps import Steps
from foldwise.memory import Candidate, Fact, MemoryManager, MemoryWorker, namespace_for
from foldwise.memory._backends import _dialect
from foldwise.memory._outbox import OutboxBatch
from foldwise.memory._outbox_sql import SqlMemoryOutbox
from foldwise.memory._rules import RulesExtractor
from foldwise.memory._sql_backend import SqlMemoryBackend

__all__ = ["POINTS", "Slice", "commit_verdict", "main", "workload"]

POINTS = (
    "enqueue",
    "debounce",
    "claim",
    "extraction",
    "apply",
    "before_completion",
    "completion",
)
USERS = 4
_CITIES = ("Munich", "Berlin", "Paris", "Lisbon", "Oslo", "Tokyo", "Austin", "Porto", "Zurich")
_NAMES = ("Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis")
_TOPICS = ("tea", "jazz", "chess", "hiking", "sushi", "opera", "rowing", "poetry", "cycling")
_DEADLINE_SECONDS = 120.0


@dataclass(frozen=True)
class Slice:
    """One update of the workload: what a run (or a compaction) enqueues."""

    chunk: int
    user: int
    thread: str
    text: str
    slot: tuple[str, str]
    origin: str = "run"
    commit_ref: str | None = None
    part: int = 0

    @property
    def namespace(self) -> tuple[str, ...]:
        return namespace_for(f"user{self.user}")

    def messages(self) -> list[BaseMessage]:
        base = f"c{self.chunk}-u{self.user}-{self.thread}-{self.part}"
        return [
            HumanMessage(content=self.text, id=f"{base}-q"),
            AIMessage(content="Noted.", id=f"{base}-a"),
        ]


def commit_verdict(ref: str) -> bool:
    """Whether the compaction `ref` committed (fixed by the ref: two in three did)."""
    return int(ref.rsplit("-", 1)[1]) % 3 != 0


def _home(chunk: int, user: int, step: int) -> tuple[str, tuple[str, str]]:
    if step % 5 == 4:
        return f"My name is {_NAMES[step % len(_NAMES)]}", ("user", "name")
    return f"I live in {_CITIES[(chunk + 2 * user + step) % len(_CITIES)]}", ("user", "home_city")


def workload(chunk: int) -> list[Slice]:
    """The chunk's slices, the same for every run.

    Per user one or two home-thread updates (city or name, single-valued: a burst of two is
    debounced into one batch) and, every other chunk, a likes-thread update (multi-valued),
    some of them compaction flushes (a third of those never committed).
    """
    slices: list[Slice] = []
    for user in range(USERS):
        step = chunk * USERS + user
        text, slot = _home(chunk, user, step)
        slices.append(Slice(chunk, user, "home", text, slot))
        if step % 3 == 0:
            text, slot = _home(chunk, user, step + 1)
            slices.append(Slice(chunk, user, "home", text, slot, part=1))
        if (chunk + user) % 2 == 0:
            text = f"I like {_TOPICS[step % len(_TOPICS)]} {chunk}"
            ref = f"receipt-{step}" if step % 4 == 1 else None
            origin = "run" if ref is None else "compaction"
            slices.append(Slice(chunk, user, "likes", text, ("user", "likes"), origin, ref))
    return slices


class _Crash:
    def __init__(self, point: str | None, hit: int) -> None:
        self.point, self.hit, self.seen = point, hit, 0

    def at(self, point: str) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen == self.hit:
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10)  # pragma: no cover - the signal is synchronous


class _Outbox(SqlMemoryOutbox):
    crash: _Crash

    def claim(self, worker_id: str, **kwargs: Any) -> list[OutboxBatch]:
        batches = super().claim(worker_id, **kwargs)
        if batches:
            self.crash.at("claim")
        return batches

    def complete(self, batch: OutboxBatch, **kwargs: Any) -> int:
        self.crash.at("before_completion")
        count = super().complete(batch, **kwargs)
        self.crash.at("completion")
        return count


class _Backend(SqlMemoryBackend):
    crash: _Crash

    def write(self, namespace: Any, **kwargs: Any) -> None:
        super().write(namespace, **kwargs)
        if kwargs.get("new"):
            self.crash.at("apply")


class _Extractor:
    name = "rules"

    def __init__(self, crash: _Crash) -> None:
        self.crash, self.rules = crash, RulesExtractor()

    def extract_steps(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact]
    ) -> Steps[list[Candidate]]:
        found = yield from self.rules.extract_steps(messages, known=known)
        self.crash.at("extraction")
        return found


def _open(url: str, crash: _Crash) -> tuple[MemoryManager, _Outbox]:
    backend, outbox = _Backend(_require(url)), _Outbox(_require(url))
    backend.crash = outbox.crash = crash
    manager = MemoryManager(backend, extractor=_Extractor(crash))
    manager.setup()
    outbox.setup()
    return manager, outbox


def _require(url: str) -> Any:
    dialect = _dialect(url)
    if dialect is None:
        raise SystemExit("the kill test needs a SQL memory URL")
    return dialect


def _produce(outbox: _Outbox, crash: _Crash, spec: dict[str, Any]) -> None:
    for chunk in spec["chunks"]:
        for item in workload(chunk):
            outbox.enqueue(
                item.namespace,
                item.messages(),
                thread_id=f"user{item.user}-{item.thread}",
                origin=item.origin,  # type: ignore[arg-type]
                commit_ref=item.commit_ref,
                debounce_seconds=spec["debounce"],
            )
            crash.at("enqueue")
        with open(spec["ledger"], "a", encoding="utf-8") as ledger:
            ledger.write(f"{chunk}\n")


def run_round(spec: dict[str, Any], index: int) -> int:
    """One process of one round; returns its exit code (0: queue drained)."""
    kill = spec.get("kill") or {}
    crash = _Crash(kill.get("point") if kill.get("proc") == index else None, kill.get("hit", 0))
    manager, outbox = _open(spec["url"], crash)
    worker = MemoryWorker(
        manager,
        outbox,
        worker_id=f"w{index}",
        lease_seconds=spec["lease"],
        poll_seconds=0.01,
        backoff_seconds=0.05,
        max_attempts=50,
        commit_check=lambda _thread, ref: commit_verdict(ref),
    )
    outbox.release_owned(worker.worker_id)  # a restart takes back its own claims at once
    _produce(outbox, crash, spec)
    deadline = time.monotonic() + _DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if worker.run_once():
            continue
        if outbox.status(dead_limit=1).live == 0:
            return 0
        crash.at("debounce")
        time.sleep(0.01)
    return 3


def _fork_round(spec: dict[str, Any]) -> list[int]:
    pids = []
    for index in range(spec["workers"]):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's exit code is what the parent sees
            code = 1
            try:
                code = run_round(spec, index)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    statuses = []
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        statuses.append(os.waitstatus_to_exitcode(status))
    return statuses


def main() -> None:
    """The fork server loop (see the module docstring)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        statuses = _fork_round(json.loads(line))
        sys.stdout.write(json.dumps({"statuses": statuses}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
