"""The load area's harness: the stub child, a real `foldwise serve`, RSS samples, percentiles.

`stub_process` starts `foldwise.bench._rel_load_stub` (as a script) and yields its URL (its
figures land in `StubProcess.figures` once it stops). `served` writes a `foldwise.yaml` pointing
`langchain_openai:ChatOpenAI` at the stub, with a small context window so long threads compact
often, starts ``python -m foldwise.cli serve`` on a free loopback port and yields the
`Server` (URL, pid, log). When it stops (SIGTERM) a non-zero exit or a traceback in its log
is a finding. `RssSampler` reads the server's ``VmRSS`` from ``/proc/<pid>/status`` every
second (no psutil). `fresh_postgres` gives a PostgreSQL URL with a new schema, dropped after.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import yaml

from foldwise.bench._reliability import Finding

__all__ = [
    "RssSampler",
    "Server",
    "StubProcess",
    "flat_rss",
    "fresh_postgres",
    "percentile",
    "served",
    "stub_process",
]

CONTEXT_WINDOW = 8000
TRIGGER_TOKENS = 3000
_HIDDEN_ENV = ("OPENAI_", "ANTHROPIC_", "FOLDWISE_", "LANGSMITH_", "LANGCHAIN_")
MIB = 1024 * 1024


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class StubProcess:
    """The stub child: its URL, and its figures (`peak`, `calls` per hot key) after it stops."""

    url: str
    figures: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def stub_process() -> Iterator[StubProcess]:
    """Run the load stub in a child process (see `foldwise.bench._rel_load_stub`)."""
    script = Path(__file__).with_name("_rel_load_stub.py")
    process = subprocess.Popen(
        [sys.executable, "-P", str(script)],  # -P: the bench folder is not put on sys.path
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the load stub did not start (said {url!r})")
        stub = StubProcess(url)
        yield stub
        process.stdin.close()
        line = process.stdout.readline()
        stub.figures = json.loads(line) if line.strip() else {}
    finally:
        if not process.stdin.closed:
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(workdir: Path, stub_url: str, storage_url: str) -> Path:
    """A `foldwise.yaml` on the stub: an 8,000-token window, compaction above 3,000 tokens.

    Keep 2 messages; everything else as shipped (human messages kept verbatim, the default
    anti-thrash minimum gain), so a long thread compacts every few turns until its kept human
    messages fill the budget, and then whenever the budget requires.
    """
    config = {
        "models": [
            {
                "name": "stub",
                "use": "langchain_openai:ChatOpenAI",
                "model": "stub",
                "base_url": stub_url + "/v1",
                "api_key": "test-key",
                "max_retries": 0,
                "stream_usage": True,
                "context_window": CONTEXT_WINDOW,
            }
        ],
        "summarization": {
            "trigger": {"type": "tokens", "value": TRIGGER_TOKENS},
            "keep": {"type": "messages", "value": 2},
            "reserved_output_tokens": 500,
        },
        "storage": {"url": storage_url},
        "offload": {"root": "artifacts"},
    }
    path = workdir / "foldwise.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@dataclass
class Server:
    """A running `foldwise serve`."""

    url: str
    pid: int
    log_path: Path


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_HIDDEN_ENV)}
    return {**env, "PYTHONUNBUFFERED": "1", "LANGSMITH_TRACING": "false"}


def _stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@contextlib.contextmanager
def served(
    workdir: Path, stub_url: str, storage_url: str, findings: list[Finding]
) -> Iterator[Server]:
    """Run `foldwise serve` on the stub and `storage_url` in `workdir`; yield it once healthy.

    On the way out a non-zero exit code or a ``Traceback`` in the server's log is appended to
    `findings` (invariant `clean-exit`).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(workdir, stub_url, storage_url)
    port = _free_port()
    log_path = workdir / f"server-{port}.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--config", str(config)]
    command += ["--port", str(port), "--log-level", "warning"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=workdir, env=_child_env(), stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"foldwise serve exited early:\n{log_path.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=1, trust_env=False).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"foldwise serve did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield Server(url, process.pid, log_path)
    finally:
        code = _stop(process)
    said = log_path.read_text("utf-8", errors="replace")
    if code != 0:
        findings.append(Finding("server", "clean-exit", f"exit code {code}: {said[-300:]}"))
    if "Traceback" in said:
        at = said.index("Traceback")
        findings.append(Finding("server", "no-traceback", said[at : at + 400]))


def rss_bytes(pid: int) -> int | None:
    """The process's resident set size from ``/proc/<pid>/status`` (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


class RssSampler:
    """Samples a process's RSS every `interval` seconds in a thread, between start and stop."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def _loop(self) -> None:
        while True:
            rss = rss_bytes(self.pid)
            if rss is not None:
                self.samples.append(rss)
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


RSS_TOLERANCE = (0.10, 20 * MIB)
"""RSS is flat when the last third's median is within 10 % or 20 MiB of the middle third's."""


def flat_rss(samples: Sequence[int], case: str) -> tuple[str, Finding | None]:
    """A note on the samples (MiB) and a finding when the last third grew past the tolerance."""
    if len(samples) < 3:
        return f"RSS {len(samples)} samples (too few to judge)", None
    third = len(samples) // 3
    middle = statistics.median(samples[third : 2 * third])
    last = statistics.median(samples[2 * third :])
    share, absolute = RSS_TOLERANCE
    grown = last - middle
    note = (
        f"RSS {samples[0] / MIB:.0f}→{max(samples) / MIB:.0f} MiB peak, median middle third "
        f"{middle / MIB:.1f} MiB, last third {last / MIB:.1f} MiB ({grown / MIB:+.1f} MiB, "
        f"{len(samples)} samples at 1 s)"
    )
    if grown > max(share * middle, absolute):
        detail = f"last third's median RSS grew {grown / MIB:.1f} MiB over the middle third's"
        return note, Finding(case, "rss-flat", detail)
    return note, None


@contextlib.contextmanager
def fresh_postgres(url: str) -> Iterator[str]:
    """`url` with a new ``?schema=`` (dropped afterwards), or `url` itself if it names one."""
    if "schema" in parse_qs(urlsplit(url).query):
        yield url
        return
    import psycopg
    from psycopg import sql

    schema = f"foldwise_load_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}schema={schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            conn.execute(drop)
