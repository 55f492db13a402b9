"""Faults of the world around the gateway: a locked SQLite file, a full disk, PostgreSQL restarts.

- **SQLite locked**: another process takes the database's write lock (`BEGIN IMMEDIATE`) and
  holds it past the gateway's 5 s busy timeout while a run arrives.
- **Disk full**: the gateway runs under `RLIMIT_FSIZE` (no privileges needed: every file it
  writes is capped, so its tables live in `memory://` and its log goes through a pipe); a tool
  answer and a pasted input too big for the context must be stored as artifacts and cannot be.
- **PostgreSQL restart** (full form only): `pg_ctlcluster --skip-systemctl-redirect <v> main
  restart` while a run is waiting on the model; the server is checked to be back afterwards.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg

from foldwise.bench._rel_faults_model import CaseRun, _history, _judge_reply
from foldwise.bench._rel_faults_stack import Brain, Reply, Thread, check_thread, error_text

__all__ = ["disk_full_cases", "postgres_restart_case", "sqlite_locked_case"]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT = 5.0
"""The gateway's SQLite busy timeout (seconds): a lock held longer makes writes fail."""

_LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def sqlite_locked_case(thread_factory: Callable[[], Thread], db: Path, hold: float) -> CaseRun:
    """A run arrives while another process holds the SQLite write lock for `hold` seconds."""
    started = time.perf_counter()
    thread = thread_factory()
    before = _history(thread)
    locker = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(db), str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert locker.stdout is not None
    line = locker.stdout.readline().decode().strip()
    if line != "locked":
        locker.kill()
        locker.wait()
        locker.stdout.close()
        raise RuntimeError(f"the lock holder did not get the lock: {line}")
    text = "a question while the database is locked"
    reply = thread.turn(text)
    locker.wait(hold + 30)
    locker.stdout.close()
    found = _judge_reply(reply, {503}, ("locked", "busy", "retry"))
    if reply.status == 503 and "retry-after" not in reply.headers:
        found.append(("retry-after", "the 503 carries no Retry-After header"))
    found += check_thread(thread, before, failed=reply.status != 200, fault_input=text)
    observed = f"{reply.status} {error_text(reply)[:90]} after {reply.seconds:.1f} s"
    return CaseRun(
        "SQLite locked by another process", observed, time.perf_counter() - started, found
    )


def disk_full_cases(thread_factory: Callable[[], Thread], root: Path) -> list[CaseRun]:
    """A tool answer and a pasted input that must be stored on a full artifact disk."""
    runs = []
    for name, text in (
        ("disk full: tool output to store", "report please kb=600"),
        (
            "disk full: pasted input to store",
            "please keep this paste: " + "ledger row 42; " * 24000,
        ),
    ):
        started = time.perf_counter()
        thread = thread_factory()
        reply = thread.turn(text)
        found = _judge_reply(reply, {200}, ())
        found += check_thread(thread, [], failed=False, fault_input=None)
        leftovers = [p.name for p in root.rglob("*") if p.is_file() and p.name.startswith(".")]
        if leftovers:
            found.append(("no-debris", f"partial files left in the artifact root: {leftovers[:5]}"))
        messages = thread.state().get("messages") or []
        sizes = [len(str(m.get("content"))) for m in messages]
        observed = f"{reply.status}, largest message kept {max(sizes, default=0):,} chars"
        runs.append(CaseRun(name, observed, time.perf_counter() - started, found))
    return runs


def _cluster_version() -> str | None:
    versions = sorted(p.name for p in Path("/etc/postgresql").glob("*") if p.is_dir())
    return versions[-1] if versions else None


def _wait_postgres(dsn: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            time.sleep(0.2)
    return False


def postgres_restart_case(
    brain: Brain, thread_factory: Callable[[], Thread], dsn: str, *, round_: int
) -> CaseRun:
    """Restart the PostgreSQL cluster while a run waits on the model; then check the thread."""
    started = time.perf_counter()
    version = _cluster_version()
    if version is None or shutil.which("pg_ctlcluster") is None:
        raise RuntimeError(
            "no local PostgreSQL cluster to restart (pg_ctlcluster, /etc/postgresql)"
        )
    thread = thread_factory()
    before = _history(thread)
    marker = brain.fault(
        f"pg-restart/{round_}", {"content": "answered after the restart", "delay": 4}
    )
    text = f"{marker} a question across a database restart"
    replies: list[Reply] = []
    runner = threading.Thread(target=lambda: replies.append(thread.turn(text)))
    runner.start()
    time.sleep(1.0)  # the run is waiting on the model now
    logger.warning(  # shared server: other suites see it restart, so say so loudly
        "reliability faults: RESTARTING PostgreSQL %s/main now (pg_ctlcluster restart)", version
    )
    restart = subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    back = _wait_postgres(dsn, 60)
    runner.join(120)
    found: list[tuple[str, str]] = []
    if restart.returncode != 0:
        found.append(("restart", f"pg_ctlcluster failed: {restart.stderr.strip()[:200]}"))
    if not back:
        return CaseRun(
            "PostgreSQL restarted mid-run",
            "the server did not come back",
            0.0,
            [("restart", "PostgreSQL did not come back within 60 s")],
        )
    reply = replies[0] if replies else Reply(0, None, "no reply", 0.0)
    if reply.status != 200:
        found += _judge_reply(reply, {503, 500}, ("storage", "connection", "terminat", "retry"))
    try:
        found += check_thread(thread, before, failed=reply.status != 200, fault_input=text)
    except httpx.HTTPStatusError as exc:  # the gateway did not come back with the database
        found.append(("I4", f"after the restart: {exc.response.status_code} {exc.response.text}"))
    observed = (
        f"in-flight run {reply.status} {error_text(reply)[:80] if reply.status != 200 else ''}"
    )
    return CaseRun(
        "PostgreSQL restarted mid-run", observed.strip(), time.perf_counter() - started, found
    )
