"""The servers `foldwise bench gateway` compares, each started on the same stub.

- `foldwise_target`: `foldwise serve` with its default agent (foldwise's middleware) on
  ChatOpenAI pointed at the stub, storage SQLite in the work folder or a PostgreSQL URL;
- `langgraph_target`: ``langgraph dev --no-browser --no-reload`` (LangGraph's in-memory
  server, langgraph-cli[inmem]) serving a plain langchain `create_agent` on the same
  ChatOpenAI, written to a temporary folder; with `poll` its queue's idle poll is shortened in
  the child process only (see `foldwise.bench._gateway_lg_child`).

Both yield a `Target`: a label, the base URL and the pid whose RSS is sampled. The child
environments hide provider keys and switch off LangSmith tracing and langgraph-cli's
analytics and version check, so nothing reaches for the network.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from foldwise.bench._serve import (
    child_env,
    free_port,
    serving,
    stop_process,
    stub_model_entry,
    wait_healthy,
    write_config,
)

__all__ = [
    "LANGGRAPH_PACKAGES",
    "Target",
    "foldwise_target",
    "langgraph_target",
    "langgraph_unavailable",
    "langgraph_versions",
]

LANGGRAPH_PACKAGES = ("langgraph-cli", "langgraph-api", "langgraph-runtime-inmem")
_GRAPH = '''"""The LangGraph side of `foldwise bench gateway`: a plain agent on the stub."""

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

model = ChatOpenAI(model="stub", base_url={base_url!r}, api_key="test-key", max_retries=0)
graph = create_agent(model, tools=[])
'''
_QUIET = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}


@dataclass(frozen=True)
class Target:
    """A running server under test."""

    label: str
    url: str
    pid: int


def langgraph_unavailable() -> str | None:
    """Why LangGraph's in-memory server cannot run here (a missing package), or None."""
    modules = ("langgraph_cli", "langgraph_api", "langgraph_runtime_inmem", "langgraph_sdk")
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        return (
            f"{', '.join(missing)} not installed (the `bench` dependency group has "
            "langgraph-cli[inmem]: run `make install`)"
        )
    return None


def langgraph_versions() -> dict[str, str]:
    """The installed versions of `LANGGRAPH_PACKAGES` (missing ones left out)."""
    found = {}
    for name in LANGGRAPH_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


@contextlib.contextmanager
def foldwise_target(label: str, workdir: Path, stub_url: str, storage_url: str) -> Iterator[Target]:
    """`foldwise serve` (one process) with its default agent on the stub, on `storage_url`."""
    config = {
        "models": [stub_model_entry(stub_url, stream_usage=True)],
        "storage": {"url": storage_url},
        "offload": {"root": "artifacts"},
    }
    path = write_config(workdir, config)
    with serving(path, workdir, env=child_env()) as server:
        yield Target(label, server.url, server.pid)


@contextlib.contextmanager
def langgraph_target(
    label: str, workdir: Path, stub_url: str, *, poll: float | None = None
) -> Iterator[Target]:
    """``langgraph dev`` on a free port serving `create_agent` on the stub as ``agent``.

    Raises:
        ServerStartError: It exited (e.g. the poll patch did not apply) or never answered.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "graph.py").write_text(_GRAPH.format(base_url=stub_url + "/v1"), "utf-8")
    spec = {"dependencies": ["."], "graphs": {"agent": "./graph.py:graph"}}
    (workdir / "langgraph.json").write_text(json.dumps(spec), "utf-8")
    port = free_port()
    script = Path(__file__).with_name("_gateway_lg_child.py")
    command = [sys.executable, "-P", str(script)]
    command += ["--poll", str(poll)] if poll is not None else []
    command += ["--", "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--config", str(workdir / "langgraph.json")]
    log_path = workdir / f"langgraph-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=child_env(_QUIET),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def alive() -> bool:
            return process.poll() is None

        wait_healthy(url, alive=alive, log_path=log_path, timeout=120, path="/ok")
        yield Target(label, url, process.pid)
    finally:
        stop_process(process)
