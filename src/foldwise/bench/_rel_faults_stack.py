"""The stack the faults area drives: `foldwise serve` subprocesses, the stub model, the checks.

`launch` starts `foldwise serve` on a free loopback port (optionally under a file-size limit,
`RLIMIT_FSIZE`, the unprivileged way to fill a disk) and waits for `/health`. `Brain` answers
the OpenAI stub's requests: a thread's turn whose text carries `[[fault:KEY]]` gets the fault
registered under KEY (once), every summarizer call (the `summ` model, then the run's own
model) hangs for threads marked `[[hang]]`, and every other turn gets a short answer (or a
`fetch_report` tool call when it asks for one). `Thread` sends turns over HTTP and remembers
every input the gateway accepted; `check_thread` reads the thread back and returns what broke:
I1/I1b (transcript), I2 (tool-call pairing), I3 (compaction receipts, markers and state agree),
"unchanged" (the state before the fault is still there, and the failed turn left nothing but its
input) and I4 (a new run works).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from langchain_core.tools import tool

from foldwise.bench._openai_stub import content_text
from foldwise.bench._serve import (
    ServerStartError,
    free_port,
    serve_command,
    wait_healthy,
    write_config,
)

__all__ = [
    "Brain",
    "Served",
    "Thread",
    "check_thread",
    "fetch_report",
    "launch",
    "model_entries",
]

SUMMARY = "SUMMARY: the earlier turns, folded."
_SECRET_FREE_KEY = "stub-key"


@tool
def fetch_report(topic: str, kilobytes: int = 1) -> str:
    """Fetch the report on `topic` (`kilobytes` of text)."""
    line = f"report on {topic}: the figures were reconciled line by line. "
    return (line * (kilobytes * 1024 // len(line) + 1))[: kilobytes * 1024]


class Brain:
    """The stub's responder: scripted faults by marker, hung summaries, plain answers."""

    def __init__(self) -> None:
        self.faults: dict[str, Any] = {}
        self.used: set[str] = set()
        self._lock = threading.Lock()
        self.answers = 0

    def fault(self, key: str, response: Any) -> str:
        """Register `response` for the next turn carrying the returned marker."""
        self.faults[key] = response
        return f"[[fault:{key}]]"

    def __call__(self, body: dict[str, Any]) -> Any:
        messages = body.get("messages") or []
        if messages and "<new_messages>" in content_text(messages[0].get("content")):
            if "[[hang]]" in json.dumps(messages):  # every summarizer model hangs
                return {"content": SUMMARY, "delay": 60}
            return SUMMARY
        last = messages[-1] if messages else {}
        users = [m for m in messages if m.get("role") == "user"]
        latest = content_text(users[-1].get("content")) if users else ""
        with self._lock:
            for key, response in self.faults.items():
                if f"[[fault:{key}]]" in latest and key not in self.used:
                    self.used.add(key)
                    return response
            self.answers += 1
            number = self.answers
        if "report please" in latest and last.get("role") == "user":
            kilobytes = int(latest.rsplit("kb=", 1)[1].split()[0]) if "kb=" in latest else 1
            call = {"name": "fetch_report", "arguments": {"topic": "q3", "kilobytes": kilobytes}}
            return {"tool_calls": [call]}
        return f"answer {number}"


def model_entries(stub_url: str, *, timeout: float) -> list[dict[str, Any]]:
    """The run model and the summarizer model (`summ`), both ChatOpenAI on the stub."""
    common = {
        "use": "langchain_openai:ChatOpenAI",
        "base_url": stub_url + "/v1",
        "api_key": _SECRET_FREE_KEY,
        "max_retries": 0,
        "context_window": 128000,
    }
    return [
        {"name": "stub", "model": "stub", "timeout": timeout, "stream_usage": True, **common},
        {"name": "summ", "model": "summ", **common},
    ]


@dataclass
class Served:
    """A running `foldwise serve`."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    _pump: threading.Thread | None = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s; reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self._pump is not None:
            self._pump.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def log_text(self) -> str:
        """The server's output so far."""
        return self.log.read_text("utf-8", errors="replace") if self.log.exists() else ""


_LIMITED = (
    "import os, resource, signal, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death; kept by exec\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)
"""Sets the file-size limit, then execs the server (no `preexec_fn`: we have threads)."""


def _copy(source: Any, log: Path) -> None:
    with log.open("ab") as sink:
        for chunk in iter(lambda: source.read1(65536), b""):
            sink.write(chunk)
            sink.flush()


def launch(
    config: Mapping[str, Any], workdir: Path, *, name: str, file_size_limit: int | None = None
) -> Served:
    """Start `foldwise serve` with `config` in `workdir`; wait (≤ 60 s) until `/health` answers.

    With `file_size_limit`, no file the server writes may grow past that many bytes (its output
    goes through a pipe, so the log is not limited).
    """
    path = write_config(workdir, config, f"{name}.yaml")
    port = free_port()
    log = workdir / f"{name}.log"
    command = serve_command(path, port)
    if file_size_limit is not None:
        command = [sys.executable, "-c", _LIMITED, str(file_size_limit), *command[1:]]
    pump = None
    if file_size_limit is None:
        with log.open("wb") as sink:
            process = subprocess.Popen(command, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT)
    else:
        process = subprocess.Popen(
            command, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        pump = threading.Thread(target=_copy, args=(process.stdout, log), daemon=True)
        pump.start()
    served = Served(process, f"http://127.0.0.1:{port}", log, pump)
    try:
        wait_healthy(served.url, alive=lambda: process.poll() is None, log_path=log)
    except ServerStartError as exc:
        served.stop()
        raise ServerStartError(f"foldwise serve ({name}): {exc}") from None
    return served


@dataclass
class Reply:
    """One HTTP answer: status, decoded body, raw text, seconds."""

    status: int
    body: Any
    text: str
    seconds: float
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Thread:
    """A thread on a served gateway and every input it accepted."""

    client: httpx.Client
    thread_id: str
    sent: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, client: httpx.Client) -> Thread:
        """A new thread."""
        response = client.post("/threads", json={})
        response.raise_for_status()
        return cls(client, str(response.json()["thread_id"]))

    def turn(self, text: str, *, stream: bool = False) -> Reply:
        """Send one user message as a run (`/runs/wait`, or `/runs/stream` with messages)."""
        body: dict[str, Any] = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": text}]},
        }
        route = "stream" if stream else "wait"
        if stream:
            body["stream_mode"] = ["messages-tuple", "values"]
        self.sent.append(text)
        started = time.perf_counter()
        response = self.client.post(f"/threads/{self.thread_id}/runs/{route}", json=body)
        reply = _reply(response, started)
        if stream and reply.status == 200:
            reply = _stream_outcome(reply)
        if 200 <= reply.status < 300:
            self.accepted.append(text)
        return reply

    def compact(self) -> Reply:
        """`POST /threads/{id}/compact`."""
        started = time.perf_counter()
        return _reply(self.client.post(f"/threads/{self.thread_id}/compact", json={}), started)

    def state(self) -> dict[str, Any]:
        """The thread's current values."""
        response = self.client.get(f"/threads/{self.thread_id}/state")
        response.raise_for_status()
        return dict(response.json().get("values") or {})

    def transcript(self) -> list[dict[str, Any]]:
        """Every transcript entry, oldest first."""
        entries: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.client.get(
                f"/threads/{self.thread_id}/transcript", params={"after_seq": after, "limit": 500}
            ).json()
            entries += page["entries"]
            if not page["has_more"]:
                return entries
            after = page["next_after_seq"]

    def receipts(self) -> list[dict[str, Any]]:
        """The thread's compaction receipts."""
        return list(self.client.get(f"/threads/{self.thread_id}/compactions").json())


def _reply(response: httpx.Response, started: float) -> Reply:
    try:
        body = response.json()
    except ValueError:
        body = None
    return Reply(
        response.status_code,
        body,
        response.text,
        time.perf_counter() - started,
        {k.lower(): v for k, v in response.headers.items()},
    )


def _stream_outcome(reply: Reply) -> Reply:
    """A streamed run's outcome: its `error` event as the status it would have had."""
    for block in reply.text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        if "event: error" in lines:
            data = "".join(line[5:].strip() for line in lines if line.startswith("data:"))
            try:
                body = json.loads(data)
            except ValueError:
                body = {"message": data}
            return Reply(599, body, reply.text, reply.seconds, reply.headers)
    return reply


def error_text(reply: Reply) -> str:
    """The error a reply carries (`detail` or an SSE error's `message`), or its text."""
    if isinstance(reply.body, Mapping):
        for key in ("detail", "message", "error"):
            if isinstance(reply.body.get(key), str):
                return str(reply.body[key])
    return reply.text[:500]


def _pairing(messages: list[dict[str, Any]]) -> list[str]:
    problems = []
    calls: set[str] = set()
    results: set[str] = set()
    for message in messages:
        if message.get("type") == "ai":
            calls |= {str(c.get("id")) for c in message.get("tool_calls") or []}
        elif message.get("type") == "tool":
            if str(message.get("tool_call_id")) not in calls:
                problems.append(f"tool message {message.get('id')} without its call")
            results.add(str(message.get("tool_call_id")))
    problems += [f"tool call {c} without its result" for c in sorted(calls - results)]
    return problems


def check_thread(
    thread: Thread,
    before: list[str],
    *,
    failed: bool,
    fault_input: str | None,
    next_turn: bool = True,
) -> list[tuple[str, str]]:
    """What broke on `thread` after a fault; `(invariant, detail)` pairs, empty when none.

    Args:
        thread: The thread (its `accepted`/`sent` inputs are checked against the transcript).
        before: The state's message ids before the fault.
        failed: The fault failed its run: the state must be `before` plus at most the input.
        fault_input: The fault's input text (allowed to remain in the state of a failed run).
        next_turn: Also check that the thread accepts a new run (I4).
    """
    found: list[tuple[str, str]] = []
    values = thread.state()
    messages = list(values.get("messages") or [])
    ids = [str(m.get("id")) for m in messages]
    if failed:
        if ids[: len(before)] != before:
            found.append(("unchanged", "the messages before the failed run changed"))
        extra = messages[len(before) :]
        if any(
            m.get("type") != "human" or content_text(m.get("content")) != fault_input for m in extra
        ):
            kinds = [m.get("type") for m in extra]
            found.append(("unchanged", f"the failed run left {kinds} in the state"))
    found += [("I2", p) for p in _pairing(messages)]
    entries = thread.transcript()
    users = [
        content_text((e.get("message") or {}).get("content"))
        for e in entries
        if e["kind"] == "message" and (e.get("message") or {}).get("type") == "human"
    ]
    found += [
        ("I1", f"accepted input missing: {t[:60]!r}") for t in thread.accepted if t not in users
    ]
    recorded = {e.get("message_id") for e in entries if e["kind"] == "message"}
    found += [("I1b", f"state message {i} not in the transcript") for i in ids if i not in recorded]
    receipts = {str(r.get("id")) for r in thread.receipts()}
    in_state = {str(r.get("id")) for r in values.get("compactions") or []}
    markers = {
        str((e.get("message") or {}).get("receipt_id") or (e.get("message") or {}).get("id"))
        for e in entries
        if e["kind"] == "compaction"
    }
    if not (receipts == in_state == markers):
        found.append(
            (
                "I3",
                f"receipts {sorted(receipts)}, state {sorted(in_state)}, markers {sorted(markers)}",
            )
        )
    if next_turn:
        reply = thread.turn("are you still there?")
        if reply.status != 200:
            found.append(("I4", f"the next run answered {reply.status}: {error_text(reply)[:200]}"))
    return found


@contextlib.contextmanager
def client_for(served: Served, timeout: float = 60) -> Iterator[httpx.Client]:
    """An HTTP client for `served`."""
    with httpx.Client(base_url=served.url, timeout=timeout) as client:
        yield client


def environ_without(*names: str) -> dict[str, str]:
    """`os.environ` without `names`."""
    return {k: v for k, v in os.environ.items() if k not in names}
