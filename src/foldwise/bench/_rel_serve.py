"""A real `foldwise serve` subprocess for the full forms of the injection and isolation areas.

`served` writes a config (the model: `langchain_openai:ChatOpenAI` against an `OpenAIStub` on
127.0.0.1), starts `python -m foldwise.cli serve` on a free loopback port, waits for `/health`
and stops it with SIGTERM afterwards. `stub_messages` turns a recorded OpenAI request into
LangChain messages so the same request checks apply (a data message is a user message that
starts with the data block's open tag: the hidden flag does not cross the wire).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from foldwise.bench._openai_stub import OpenAIStub
from foldwise.durable import DATA_OPEN
from foldwise.messages import DURABLE_DATA_FLAG

__all__ = ["served", "stub_messages", "stub_model"]


def stub_model(stub: OpenAIStub) -> dict[str, Any]:
    """The `models:` entry pointing ChatOpenAI at `stub`."""
    return {
        "name": "stub",
        "use": "langchain_openai:ChatOpenAI",
        "model": "stub",
        "base_url": stub.url + "/v1",
        "api_key": "test-key",
        "max_retries": 0,
        "context_window": 128000,
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(config: Mapping[str, Any], workdir: Path) -> Iterator[str]:
    """Run `foldwise serve` with `config` in `workdir`; yield its base URL.

    Raises:
        RuntimeError: The server exited early or did not answer `/health` within 60 s.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "foldwise.yaml"
    path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    port = _free_port()
    log_path = workdir / f"server-{port}.log"
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--config", str(path)]
    command += ["--port", str(port), "--log-level", "warning"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"foldwise serve exited early: {log_path.read_text()[-800:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"foldwise serve did not start: {log_path.read_text()[-800:]}")
            time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def stub_messages(body: Mapping[str, Any]) -> list[BaseMessage]:
    """A recorded chat-completions request body as LangChain messages."""
    found: list[BaseMessage] = []
    for message in body.get("messages") or []:
        role, text = message.get("role"), _text(message.get("content"))
        if role in ("system", "developer"):
            found.append(SystemMessage(text))
        elif role == "user":
            flag = {DURABLE_DATA_FLAG: True} if text.startswith(DATA_OPEN) else {}
            found.append(HumanMessage(text, additional_kwargs=flag))
        else:
            calls = json.dumps(message.get("tool_calls") or [])
            found.append(AIMessage(f"{text}\n{calls}" if role == "assistant" else text))
    return found
