"""Start, kill and reap the crash campaign's servers.

Two launchers, one interface (`start(config, cwd, env) -> Server`):

- `ForkLauncher`: one `foldwise.bench._rel_crash_fork` process imports the gateway once and
  forks a real uvicorn server per start (SQLite rows: the restarts are the campaign's cost);
- `ServeLauncher`: `python -m foldwise.cli serve --config ... --port ... [--workers N]`, in its
  own session so the supervisor and its workers die together (PostgreSQL, two workers).

A `Server` is dead once its crash mark exists (a worker killed itself at the named point; the
rest of the server is then SIGKILLed too) or once the harness SIGKILLed it (random time).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from foldwise.bench._serve import ServerStartError, free_port, serve_command, wait_healthy

__all__ = ["ForkLauncher", "Launcher", "ServeLauncher", "Server"]

_START_SECONDS = 90.0


class Server:
    """A started server: its URL, log and how to kill and reap it."""

    def __init__(self, url: str, log: Path, launcher: Launcher, handle: int) -> None:
        self.url, self.log, self.launcher, self.handle = url, log, launcher, handle
        self.dead = False

    def kill(self) -> float:
        """SIGKILL the whole server now (idempotent); return when it was killed."""
        killed = time.time()
        if not self.dead:
            self.launcher.kill(self.handle)
            self.launcher.reap(self.handle)
            self.dead = True
        return killed

    def stop(self) -> None:
        """SIGTERM it and wait (a clean stop, at the end of a chain)."""
        if not self.dead:
            self.launcher.terminate(self.handle)
            self.launcher.reap(self.handle)
            self.dead = True

    def wait_ready(self, seconds: float = _START_SECONDS) -> None:
        """Poll `/health` until it answers 200, at most `seconds` (else it is killed)."""
        alive = functools.partial(self.launcher.alive, self.handle)
        try:
            wait_healthy(self.url, alive=alive, log_path=self.log, timeout=seconds)
        except ServerStartError:
            self.kill()
            raise


class Launcher(Protocol):
    """Starts servers and signals them by handle."""

    def start(self, config: Path, cwd: Path, env: dict[str, str], log: Path) -> Server: ...
    def kill(self, handle: int) -> None: ...
    def terminate(self, handle: int) -> None: ...
    def reap(self, handle: int) -> None: ...
    def alive(self, handle: int) -> bool: ...
    def close(self) -> None: ...


class ForkLauncher:
    """Forks servers from one pre-imported process (see `foldwise.bench._rel_crash_fork`)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "foldwise.bench._rel_crash_fork"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reaped: set[int] = set()

    def _ask(self, request: dict[str, object]) -> dict[str, int]:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise ServerStartError("the fork server died")
        answer: dict[str, int] = json.loads(line)
        return answer

    def start(self, config: Path, cwd: Path, env: dict[str, str], log: Path) -> Server:
        """Fork a server on a free port and wait until it answers."""
        port = free_port()
        request = {
            "op": "start",
            "config": str(config),
            "cwd": str(cwd),
            "port": port,
            "log": str(log),
            "env": env,
        }
        pid = self._ask(request)["pid"]
        server = Server(f"http://127.0.0.1:{port}", log, self, pid)
        server.wait_ready()
        return server

    def kill(self, handle: int) -> None:
        """SIGKILL the forked server."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle, signal.SIGKILL)

    def terminate(self, handle: int) -> None:
        """SIGTERM the forked server."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle, signal.SIGTERM)

    def reap(self, handle: int) -> None:
        """Wait for the forked server's exit (the fork server reaps it)."""
        if handle not in self._reaped:
            self._ask({"op": "wait", "pid": handle})
            self._reaped.add(handle)

    def alive(self, handle: int) -> bool:
        """Whether the server process still exists (a zombie counts as dead)."""
        try:
            stat = Path(f"/proc/{handle}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def close(self) -> None:
        """Stop the fork server."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(30)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class ServeLauncher:
    """`foldwise serve` subprocesses (with `workers` worker processes)."""

    def __init__(self, workers: int = 1, *, start_seconds: float = _START_SECONDS) -> None:
        self.workers = workers
        self.start_seconds = start_seconds
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, config: Path, cwd: Path, env: dict[str, str], log: Path) -> Server:
        """Start `foldwise serve` on a free port and wait until it answers."""
        port = free_port()
        workers = ("--workers", str(self.workers)) if self.workers > 1 else ()
        command = serve_command(config, port, *workers)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[proc.pid] = proc
        server = Server(f"http://127.0.0.1:{port}", log, self, proc.pid)
        server.wait_ready(self.start_seconds)
        return server

    def kill(self, handle: int) -> None:
        """SIGKILL the server's whole process group (supervisor and workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle, signal.SIGKILL)

    def terminate(self, handle: int) -> None:
        """SIGTERM the supervisor (it stops its workers)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle, signal.SIGTERM)

    def reap(self, handle: int) -> None:
        """Wait for the supervisor; SIGKILL the group if it lingers."""
        proc = self._procs.pop(handle, None)
        if proc is None:
            return
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill(handle)
            proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle, signal.SIGKILL)  # no worker outlives its supervisor

    def alive(self, handle: int) -> bool:
        """Whether the supervisor runs."""
        proc = self._procs.get(handle)
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        """Kill whatever still runs."""
        for handle in list(self._procs):
            self.kill(handle)
            self.reap(handle)
