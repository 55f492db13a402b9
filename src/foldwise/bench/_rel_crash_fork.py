"""The crash campaign's fork server: imports the gateway once, forks a real server per start.

`python -m foldwise.bench._rel_crash_fork` reads one JSON request per line on stdin and answers
one JSON line on stdout:

- ``{"op": "start", "config": path, "cwd": dir, "port": n, "log": path, "env": {...}}``: fork a
  child that sets `env`, changes to `cwd`, sends its output to `log` and serves the gateway of
  `config` with uvicorn on 127.0.0.1:`port` (what `foldwise serve --config path --port n`
  runs: the configuration loaded, the agent built once to fail early, `create_app`, uvicorn
  with its lifespan); answers ``{"pid": child}``.
- ``{"op": "wait", "pid": n}``: reap the child; answers ``{"status": raw wait status}``.

The ~2 s of imports (LangChain, LangGraph, FastAPI) happen once, before any fork, so each
restart of the server costs what the server's own start-up does. The child is a whole server
process: a SIGKILL (sent by the harness, or by the child itself at a crash point) ends it
without a ``finally``, like `foldwise serve`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import langchain_openai  # noqa: F401 - imported before forking, as the model's module
import uvicorn

from foldwise.agent import create_agent
from foldwise.bench import _rel_crash_tools  # noqa: F401 - the configured tool's module
from foldwise.config import load_config
from foldwise.gateway import create_app

__all__ = ["main"]


def _die_with_parent() -> None:
    """Linux: SIGKILL this child when the fork server dies (no orphan server outlives a run)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child(request: dict[str, Any]) -> None:  # pragma: no cover - runs in the forked child
    _die_with_parent()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.update(request.get("env") or {})
    os.chdir(request["cwd"])
    try:
        config = load_config(Path(request["config"]))
        create_agent(config, memory_worker=False)  # as `foldwise serve` checks it
        app = create_app(config)
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=int(request["port"]),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=15,
        )
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _warm(config_path: str, warmed: set[str]) -> None:
    """Build the agent once here: its lazy imports (the OpenAI client's) then fork warm."""
    if config_path not in warmed:
        warmed.add(config_path)
        create_agent(load_config(Path(config_path)), memory_worker=False)


def main() -> None:
    """Serve start/wait requests until stdin closes."""
    warmed: set[str] = set()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "start":
            _warm(request["config"], warmed)
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                _child(request)
            answer: dict[str, Any] = {"pid": pid}
        else:
            _, status = os.waitpid(int(request["pid"]), 0)
            answer = {"status": status}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
