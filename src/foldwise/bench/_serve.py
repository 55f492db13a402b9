"""Servers for the benchmarks and the tests: `foldwise serve`, the stub process, RSS, the app.

One place for what every harness that talks to a real gateway needs:

- `start_serve` / `serving`: ``python -m foldwise.cli serve --config ... --port <free>`` in a
  child process with a clean environment (`child_env`), its output in a log file, ready once
  ``/health`` answers 200; `ServeProcess.stop` sends SIGTERM (SIGKILL after a grace period) and
  `ServeProcess.require_clean_exit` turns a non-zero exit code into `ServerExitError`;
- `wait_healthy`: the health poll alone, for launchers that start servers their own way;
- `stub_process`: `foldwise.bench._rel_load_stub` (the OpenAI stub, steered by the user's text)
  in a child process, so its request threads stay out of the load generator's GIL;
- `stub_model_entry` and `write_config`: a ``models:`` entry for ChatOpenAI on a stub, and a
  ``foldwise.yaml`` written into a directory;
- `RssSampler`, `rss_bytes`, `rss_growth`: a process's resident set size from ``/proc``;
- `percentile`: nearest-rank percentiles;
- `open_app`: the app's lifespan in-process, with an httpx client through `httpx.ASGITransport`.
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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml

if TYPE_CHECKING:
    from fastapi import FastAPI

    from foldwise.config import FoldwiseConfig

__all__ = [
    "HIDDEN_ENV",
    "MIB",
    "RSS_TOLERANCE",
    "RssSampler",
    "ServeProcess",
    "ServerExitError",
    "ServerStartError",
    "StubProcess",
    "child_env",
    "free_port",
    "open_app",
    "percentile",
    "rss_bytes",
    "rss_growth",
    "serve_command",
    "serving",
    "start_serve",
    "stop_process",
    "stub_model_entry",
    "stub_process",
    "wait_healthy",
    "write_config",
]

MIB = 1024 * 1024
HIDDEN_ENV = ("OPENAI_", "ANTHROPIC_", "FOLDWISE_", "LANGSMITH_", "LANGCHAIN_")
"""Prefixes of the variables a child server never inherits (keys, settings, tracing)."""


class ServerStartError(RuntimeError):
    """The server exited before it was ready, or never answered its health check."""


class ServerExitError(RuntimeError):
    """The server stopped with a non-zero exit code."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(
    extra: Mapping[str, str] | None = None, *, pythonpath: Sequence[str | Path] = ()
) -> dict[str, str]:
    """This process's environment minus `HIDDEN_ENV`, unbuffered, tracing off, plus `extra`.

    Args:
        extra: Variables set last (they may set a hidden prefix on purpose).
        pythonpath: Folders put in front of ``PYTHONPATH`` (e.g. the repository root, so a
            configured tool in ``tests.support`` imports).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(HIDDEN_ENV)}
    env.update(PYTHONUNBUFFERED="1", LANGSMITH_TRACING="false")
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), env.get("PYTHONPATH", "")])
    return {**env, **(extra or {})}


def stub_model_entry(stub_url: str, **overrides: Any) -> dict[str, Any]:
    """A ``models:`` entry: ChatOpenAI named and called ``stub`` on the stub at `stub_url`."""
    entry: dict[str, Any] = {
        "name": "stub",
        "use": "langchain_openai:ChatOpenAI",
        "model": "stub",
        "base_url": stub_url + "/v1",
        "api_key": "test-key",
        "max_retries": 0,
        "context_window": 128000,
    }
    return {**entry, **overrides}


def write_config(directory: Path, config: Mapping[str, Any], name: str = "foldwise.yaml") -> Path:
    """Write `config` as YAML to ``directory / name`` (folders made); return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    return path


def serve_command(config: Path, port: int, *options: str) -> list[str]:
    """The ``foldwise serve`` command line on `port` with `config` (warnings logged only)."""
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--config", str(config)]
    return [*command, "--port", str(port), "--log-level", "warning", *options]


def _tail(log_path: Path, chars: int = 3000) -> str:
    if not log_path.exists():
        return ""
    return log_path.read_text("utf-8", errors="replace")[-chars:]


def wait_healthy(
    url: str,
    *,
    alive: Callable[[], bool],
    log_path: Path,
    timeout: float = 60.0,
    interval: float = 0.05,
    path: str = "/health",
) -> None:
    """Poll ``url + path`` until it answers 200.

    Raises:
        ServerStartError: `alive()` turned false first, or `timeout` seconds passed (the
            message quotes the end of `log_path`).
    """
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise ServerStartError(f"the server at {url} exited early:\n{_tail(log_path)}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + path, timeout=1, trust_env=False).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise ServerStartError(
                f"the server at {url} did not answer {path} within {timeout:.0f} s:\n"
                f"{_tail(log_path)}"
            )
        time.sleep(interval)


def stop_process(process: subprocess.Popen[Any], timeout: float = 30.0) -> int:
    """SIGTERM `process`, SIGKILL it after `timeout` seconds; reap it; return its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@dataclass
class ServeProcess:
    """A started server process: its URL, the process and its log file."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once it stopped, else None."""
        return self.process.poll()

    def log_text(self) -> str:
        """Everything the server wrote so far."""
        return self.log_path.read_text("utf-8", errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int:
        """Stop it cleanly (SIGTERM, SIGKILL after `timeout`); return its exit code."""
        return stop_process(self.process, timeout)

    def require_clean_exit(self) -> None:
        """Raise `ServerExitError` (quoting the log) unless it exited with code 0."""
        code = self.returncode
        if code != 0:
            raise ServerExitError(f"the server exited with {code}:\n{_tail(self.log_path)}")


def start_serve(
    config: Path,
    cwd: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[str | Path] = (),
    timeout: float = 60.0,
) -> ServeProcess:
    """Start `foldwise serve` with `config` on a free port in `cwd`; return it once healthy.

    Args:
        config: The ``foldwise.yaml`` to serve.
        cwd: The working directory (relative storage paths resolve here; the log lands here).
        *options: Extra ``foldwise serve`` options (``--workers``, ...).
        env: The child's whole environment (default: `child_env()`).
        pythonpath: With the default environment, folders put in front of ``PYTHONPATH``.
        timeout: Seconds to wait for ``/health``.

    Raises:
        ServerStartError: It exited early or never answered (it is killed and reaped first).
    """
    port = free_port()
    log_path = cwd / f"server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_command(config, port, *options),
            cwd=cwd,
            env=dict(env) if env is not None else child_env(pythonpath=pythonpath),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = ServeProcess(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_healthy(
            server.url, alive=lambda: process.poll() is None, log_path=log_path, timeout=timeout
        )
    except ServerStartError:
        process.kill()
        process.wait()
        raise
    return server


@contextlib.contextmanager
def serving(
    config: Path,
    cwd: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[str | Path] = (),
    timeout: float = 60.0,
    check_exit: bool = True,
) -> Iterator[ServeProcess]:
    """`start_serve`, yield the server, stop it on the way out.

    With `check_exit`, a non-zero exit code raises `ServerExitError` once the body finished
    without an exception of its own (which would otherwise be hidden).
    """
    server = start_serve(config, cwd, *options, env=env, pythonpath=pythonpath, timeout=timeout)
    try:
        yield server
    finally:
        server.stop()
    if check_exit:
        server.require_clean_exit()


@dataclass
class StubProcess:
    """The stub child: its URL, and its figures (`peak`, `calls` per hot key) after it stops."""

    url: str
    figures: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def stub_process() -> Iterator[StubProcess]:
    """Run `foldwise.bench._rel_load_stub` in a child process; yield its URL."""
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


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


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


def rss_growth(samples: Sequence[int]) -> tuple[float, float] | None:
    """The medians (bytes) of the samples' middle and last thirds; None below 3 samples."""
    if len(samples) < 3:
        return None
    third = len(samples) // 3
    return statistics.median(samples[third : 2 * third]), statistics.median(samples[2 * third :])


@contextlib.asynccontextmanager
async def open_app(
    config: FoldwiseConfig,
    factory: Any = None,
    *,
    base_url: str = "http://testserver",
    client_timeout: float = 30.0,
    **options: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """Run the gateway app's lifespan; yield an httpx client talking to it in-process, and it.

    Args:
        config: The `FoldwiseConfig` for `foldwise.gateway.create_app`.
        factory: Its `agent_factory` (None: the default agents).
        base_url: The client's base URL (the host the app sees).
        client_timeout: The client's timeout in seconds.
        **options: More `create_app` keyword options.
    """
    from foldwise.gateway import create_app  # deferred: the subprocess helpers need no app

    app = create_app(config, agent_factory=factory, **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url=base_url, timeout=client_timeout
        ) as client:
            yield client, app
