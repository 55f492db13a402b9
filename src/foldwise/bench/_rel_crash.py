"""Crash points (issue 15, item 1): SIGKILL a real server, restart it, check I1–I6.

A chain is one database, one OpenAI stub (`_rel_crash_tools.brain`) and a sequence of cases.
Each case is one kill, one restart and the checks:

1. the server is running (started for this case) with `FOLDWISE_TEST_CRASH_AT=<point>:<nth>`
   (a named case) or without (a random-time case), not armed yet;
2. the harness arms it (touches the arm file) and drives the scenario on the chain's thread:
   `/runs/wait` (a statement memory extracts), `/runs/stream` (a tool call whose output is
   offloaded), a background run polled to its end, `POST /compact`, and a long `/runs/wait`
   (automatic compaction), in a loop, until the server dies: at the named point (the process
   SIGKILLs itself; with `--workers 2` the rest of the server is then killed too) or, in a
   random-time case, when the harness SIGKILLs it after a seeded delay;
3. the next case's server starts on the same database (so each start serves one check and one
   crash) and the previous case is checked (`_rel_crash_checks`): I1–I5 per thread, I2 on
   every request the model received, I6 on the files; SQLite lease rows are read directly too.

After the last case a clean server drains the memory queue (its claims expired in the database:
their lease is 60 s) and every city the user stated in an accepted message must be in a fact.

Rows: SQLite through `ForkLauncher` (a real uvicorn server forked from a pre-imported process;
the short form: 20 named points; the full form: 200 cases) and PostgreSQL through `foldwise
serve --workers 2` (50 cases; skipped without `postgres_url`).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from foldwise._crash import CRASH_ARM_ENV, CRASH_AT_ENV, CRASH_MARK_ENV, CRASH_POINTS
from foldwise.bench._openai_stub import OpenAIStub
from foldwise.bench._rel_crash_checks import (
    Ledger,
    check_files,
    check_threads,
    provider_pairing,
    user_message,
)
from foldwise.bench._rel_crash_db import drop_schema, expire_memory_claims, stale_leases
from foldwise.bench._rel_crash_server import ForkLauncher, Launcher, ServeLauncher, Server
from foldwise.bench._rel_crash_tools import LEASE_TTL, brain, server_config
from foldwise.bench._reliability import AreaOptions, AreaResult, Finding, area_command

__all__ = ["Case", "plan_cases", "run"]

SHORT_CASES = 20
FULL_SQLITE_CASES = 200
FULL_POSTGRES_CASES = 50
_THREAD_CASES = 6
"""Cases per thread before the chain starts a new one (transcripts stay small)."""
_MAX_OPS = 20
_CHAINS = 2
"""SQLite chains run side by side (the servers mostly wait on each other and the stub)."""
_FILLER = "The quarterly plan lists owners, dates and budgets for every workstream. " * 28


@dataclass(frozen=True)
class Case:
    """One kill: at a named point's `nth` hit, or after `delay` seconds (random time)."""

    name: str
    point: str | None = None
    nth: int = 1
    delay: float = 0.0


def plan_cases(count: int, seed: int, *, named_only: bool) -> list[Case]:
    """`count` cases: the named points in turn (nth 1, 2, 3...), a random kill every third.

    With `named_only` (the short form) every case is a named point.
    """
    rng = random.Random(seed)
    points = list(CRASH_POINTS)
    rng.shuffle(points)
    cases: list[Case] = []
    named = 0
    while len(cases) < count:
        if not named_only and len(cases) % 3 == 2:
            delay = round(rng.uniform(0.05, 3.0), 3)
            cases.append(Case(f"random@{delay}s", delay=delay))
            continue
        point = points[named % len(points)]
        # Manual compactions come once every five operations: their points' early hits only.
        rare = point.startswith(("receipt.manual", "compact.finish"))
        nth = (named // len(points)) % 2 + 1 if rare else (named // len(points)) % 4 + 1
        nth += 0 if rare else rng.randrange(2)
        cases.append(Case(f"{point}:{nth}", point=point, nth=nth))
        named += 1
    return cases


def _letters(number: int) -> str:
    out = ""
    number += 1
    while number:
        number, rest = divmod(number - 1, 26)
        out = chr(ord("a") + rest) + out
    return out


class _Driver:
    """Drives the scenario on one thread until the server dies (or `_MAX_OPS`)."""

    def __init__(self, url: str, thread_id: str, ledger: Ledger, tag: str, start_op: int) -> None:
        self.url, self.thread_id, self.ledger, self.tag = url, thread_id, ledger, tag
        self.op = start_op
        self.stop = threading.Event()

    def _post(self, client: httpx.Client, path: str, message_id: str, text: str) -> bool:
        body = {"assistant_id": "agent", "input": user_message(message_id, text)}
        answer = client.post(f"/threads/{self.thread_id}{path}", json=body)
        if answer.status_code == 200:
            self.ledger.accept(self.thread_id, message_id)
        return answer.status_code == 200

    def _stream(self, client: httpx.Client, message_id: str, text: str) -> None:
        body = {
            "assistant_id": "agent",
            "input": user_message(message_id, text),
            "stream_mode": ["values", "messages"],
        }
        path = f"/threads/{self.thread_id}/runs/stream"
        with client.stream("POST", path, json=body) as answer:
            if answer.status_code == 200:
                self.ledger.accept(self.thread_id, message_id)
            for _ in answer.iter_bytes():
                pass

    def _background(self, client: httpx.Client, message_id: str, text: str) -> None:
        body = {"assistant_id": "agent", "input": user_message(message_id, text)}
        answer = client.post(f"/threads/{self.thread_id}/runs", json=body)
        if answer.status_code != 200:
            return
        self.ledger.accept(self.thread_id, message_id)
        run_id = answer.json()["run_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.stop.is_set():
            run = client.get(f"/threads/{self.thread_id}/runs/{run_id}").json()
            if run.get("status") not in ("pending", "running"):
                return
            time.sleep(0.05)

    def step(self, client: httpx.Client) -> None:
        """One operation of the scenario."""
        kind = self.op % 5
        message_id = f"{self.tag}-{self.op}"
        self.op += 1
        if kind == 0:
            city = "Nor" + _letters(self.op)
            text = f"My name is Ada. I live in {city.capitalize()}."
            if self._post(client, "/runs/wait", message_id, text):
                self.ledger.cities.add(city.capitalize())
        elif kind == 1:
            self._stream(client, message_id, f"report q{self.op} please")
        elif kind == 2:
            self._background(client, message_id, f"Please note item {self.op}. {_FILLER[:600]}")
        elif kind == 3:  # every other time keeping 2 messages, so manual receipts are written
            forced = self.op % 10 < 5
            body = {"force": True, "keep": {"type": "messages", "value": 2}} if forced else {}
            client.post(f"/threads/{self.thread_id}/compact", json=body)
        else:
            self._post(client, "/runs/wait", message_id, f"Long context {self.op}: {_FILLER}")

    def drive(self, dead: Callable[[], bool]) -> None:
        """Run steps until `dead()`, a stop request or `_MAX_OPS`."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            for _ in range(_MAX_OPS):
                if dead() or self.stop.is_set():
                    return
                try:
                    self.step(client)
                except httpx.TransportError:
                    return  # the server died under the request


@dataclass
class _ChainResult:
    cases: int
    findings: list[Finding]
    unreached: list[str]


class _Chain:
    """One database, one stub, a sequence of cases (see the module docstring)."""

    def __init__(self, workdir: Path, storage_url: str, launcher: Launcher, stub: OpenAIStub):
        self.workdir, self.storage_url, self.launcher, self.stub = (
            workdir,
            storage_url,
            launcher,
            stub,
        )
        self.server_dir = workdir / "server"
        self.server_dir.mkdir(parents=True, exist_ok=True)
        self.config = server_config(self.server_dir, stub.url, storage_url)
        self.ledger = Ledger()
        self.thread_id = ""
        self.op = 0
        self.reported: set[tuple[str, str]] = set()

    def _env(self, case: Case | None, index: int) -> dict[str, str]:
        if case is None or case.point is None:
            return {}
        return {
            CRASH_AT_ENV: f"{case.point}:{case.nth}",
            CRASH_ARM_ENV: str(self.workdir / f"arm-{index}"),
            CRASH_MARK_ENV: str(self.workdir / f"mark-{index}"),
        }

    def _start(self, case: Case | None, index: int) -> Server:
        log = self.workdir / f"server-{index}.log"
        return self.launcher.start(self.config, self.server_dir, self._env(case, index), log)

    def _thread(self, url: str, index: int) -> str:
        if not self.thread_id or index % _THREAD_CASES == 0:
            answer = httpx.post(url + "/threads", json={"thread_id": str(uuid.uuid4())}, timeout=30)
            answer.raise_for_status()
            self.thread_id = answer.json()["thread_id"]
            self.ledger.threads.append(self.thread_id)
        return self.thread_id

    def _crash(self, server: Server, case: Case, index: int) -> tuple[float, bool]:
        """Drive the case until the kill; return the kill time and whether the point was hit."""
        thread_id = self._thread(server.url, index)
        driver = _Driver(server.url, thread_id, self.ledger, f"c{index}", self.op)
        mark = self.workdir / f"mark-{index}"
        if case.point is not None:
            (self.workdir / f"arm-{index}").touch()
            driver.drive(mark.exists)
            deadline = time.monotonic() + 5
            while not mark.exists() and time.monotonic() < deadline:
                if not server.launcher.alive(server.handle):
                    break
                time.sleep(0.02)
            hit = mark.exists()
            killed = mark.stat().st_mtime if hit else time.time()
            server.kill()
        else:
            worker = threading.Thread(target=driver.drive, args=(lambda: False,), daemon=True)
            worker.start()
            time.sleep(case.delay)
            killed, hit = server.kill(), True
            driver.stop.set()
            worker.join(60)
        self.op = driver.op
        # The dead server's memory claims would block its users' queue for their 60 s lease;
        # no server runs now, so every claim is the dead one's: expire it as time would.
        expire_memory_claims(self.storage_url)
        return killed, hit

    def _check(self, server: Server, case: Case, killed: float) -> list[Finding]:
        found = self._lease_rows(case, killed)
        threads = [self.thread_id]
        found += check_threads(server.url, case.name, threads, self.ledger, killed, LEASE_TTL)
        requests = self.stub.requests[self.ledger.stub_checked :]
        self.ledger.stub_checked += len(requests)
        found += [
            Finding(case.name, "I2", f"to the model: {p}") for p in provider_pairing(requests)
        ]
        found += check_files(case.name, self.server_dir)
        # A problem left in the database is seen again by every later case: reported once.
        fresh = [f for f in found if (f.invariant, f.detail) not in self.reported]
        self.reported.update((f.invariant, f.detail) for f in fresh)
        return fresh

    def _lease_rows(self, case: Case, killed: float) -> list[Finding]:
        stale = stale_leases(self.storage_url, killed, LEASE_TTL)
        return [Finding(case.name, "I5", line) for line in stale]

    def run(self, cases: list[Case]) -> _ChainResult:
        """Every case, then the memory drain check; findings and counts."""
        findings: list[Finding] = []
        unreached: list[str] = []
        server = self._start(cases[0] if cases else None, 0)
        previous: tuple[Case, float] | None = None
        try:
            for index, case in enumerate(cases):
                if previous is not None:
                    findings += self._check(server, *previous)
                killed, hit = self._crash(server, case, index)
                if not hit:
                    unreached.append(case.name)
                previous = (case, killed)
                following = cases[index + 1] if index + 1 < len(cases) else None
                server = self._start(following, index + 1)
            if previous is not None:
                findings += self._check(server, *previous)
                findings += self._memory(server)
        finally:
            server.stop()
        return _ChainResult(len(cases), findings, unreached)

    def _memory(self, server: Server) -> list[Finding]:
        """Every stated city reached memory once the queue drained."""
        deadline = time.monotonic() + 30
        with httpx.Client(base_url=server.url, timeout=30) as client:
            while time.monotonic() < deadline:
                queue = client.get("/memory/queue").json()
                live = sum(n for s, n in queue["counts"].items() if s in ("pending", "claimed"))
                if not live:
                    break
                time.sleep(0.2)
            else:
                return [Finding("memory", "I3", f"the memory queue never drained: {queue}")]
            facts = client.get("/memory/facts", params={"limit": 1000}).json()["facts"]
        texts = " ".join(f["text"] for f in facts)
        lost = sorted(c for c in self.ledger.cities if c not in texts)
        found = [Finding("memory", "I3", f"stated but not in memory: {lost}")] if lost else []
        if queue.get("dead"):
            found.append(Finding("memory", "I3", f"dead letters: {queue['dead'][:2]}"))
        return found


def _row(
    area: str, options: AreaOptions, result: _ChainResult, seconds: float, *extra: str
) -> AreaResult:
    notes = [f"{result.cases} kill(s), each followed by a restart and the checks"]
    if result.unreached:
        notes.append(
            f"{len(result.unreached)} named point(s) not reached within {_MAX_OPS} operations "
            f"(killed then instead): {', '.join(result.unreached[:6])}"
        )
    return AreaResult(
        area=area,
        cases=result.cases,
        violations=result.findings,
        command=area_command("crash", options, *extra),
        seconds=seconds,
        notes=notes,
    )


def _sqlite_chain(workdir: Path, cases: list[Case]) -> _ChainResult:
    launcher = ForkLauncher()
    try:
        with OpenAIStub(brain) as stub:
            url = f"sqlite:///{workdir / 'server' / 'data' / 'foldwise.db'}"
            return _Chain(workdir, url, launcher, stub).run(cases)
    finally:
        launcher.close()


def _sqlite(options: AreaOptions) -> AreaResult:
    """`_CHAINS` chains side by side, each on its own database, stub and fork server."""
    started = time.perf_counter()
    count = FULL_SQLITE_CASES if options.full else SHORT_CASES
    cases = plan_cases(count, options.seed, named_only=not options.full)
    with ThreadPoolExecutor(_CHAINS) as pool:
        parts = list(
            pool.map(
                lambda i: _sqlite_chain(options.workdir / f"sqlite-{i}", cases[i::_CHAINS]),
                range(_CHAINS),
            )
        )
    result = _ChainResult(
        sum(p.cases for p in parts),
        [f for p in parts for f in p.findings],
        [u for p in parts for u in p.unreached],
    )
    return _row("crash points, SQLite", options, result, time.perf_counter() - started)


def _postgres(options: AreaOptions) -> AreaResult:
    command = area_command("crash", options, "--postgres URL")
    if options.postgres_url is None or not options.full:
        reason = "no --postgres URL" if options.postgres_url is None else "full form only"
        return AreaResult(
            "crash points, PostgreSQL, 2 workers", 0, [], command, notes=[f"skipped: {reason}"]
        )
    started = time.perf_counter()
    dsn = options.postgres_url.partition("?")[0]
    schema = f"foldwise_crash_{uuid.uuid4().hex[:10]}"
    cases = plan_cases(FULL_POSTGRES_CASES, options.seed + 1, named_only=False)
    launcher = ServeLauncher(workers=2)
    try:
        with OpenAIStub(brain) as stub:
            chain = _Chain(options.workdir / "postgres", f"{dsn}?schema={schema}", launcher, stub)
            result = chain.run(cases)
    finally:
        launcher.close()
        drop_schema(dsn, schema)
    return _row(
        "crash points, PostgreSQL, 2 workers",
        options,
        result,
        time.perf_counter() - started,
        "--postgres URL",
    )


def run(options: AreaOptions) -> list[AreaResult]:
    """The crash rows: SQLite (short or full) and PostgreSQL with two workers (full only)."""
    return [_sqlite(options), _postgres(options)]
