"""The load area's clients: timed whole requests, their statuses, and the transcript checks.

Every simulated client owns one `httpx.AsyncClient` (its own keep-alive connection, as
separate users would have); `Tally` collects, per request kind, the latency of whole requests
(for `/runs/stream`, until the last byte of the stream) and the statuses. A 5xx, a transport
error, an unexpected status, a wrong answer or an `error` event in a stream is a `Finding`
carrying the response body. `check_thread` then reads a thread's `/transcript`, `/state` and
`/compactions` and checks I1 (every accepted user message is in the transcript, in order),
I1b (every message of the state is in the transcript) and that no refused input was recorded.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from foldwise.bench._reliability import Finding
from foldwise.bench._serve import percentile

__all__ = ["Outcome", "Tally", "ThreadAudit", "check_thread", "new_client", "run_turn"]

_BODY_CHARS = 400
MAX_FINDINGS = 25
"""Findings kept per tally (the rest are counted in `Tally.dropped`)."""


def new_client(url: str, *, timeout: float = 120.0) -> httpx.AsyncClient:
    """One simulated client's connection to the gateway (no proxies from the environment)."""
    return httpx.AsyncClient(base_url=url, timeout=timeout, trust_env=False)


@dataclass
class Tally:
    """Latencies (seconds) and statuses per request kind, and the findings of one scenario."""

    case: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[int] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    dropped: int = 0

    @property
    def requests(self) -> int:
        """Requests answered (any status)."""
        return sum(self.statuses.values())

    def find(self, invariant: str, detail: str) -> None:
        """Record a violation (the first `MAX_FINDINGS`; later ones are only counted)."""
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(self.case, invariant, detail))
        else:
            self.dropped += 1

    def figures(self, kind: str) -> str:
        """``kind p50 X ms, p99 Y ms (n)`` for one request kind."""
        values = self.latencies.get(kind) or []
        p50, p99 = percentile(values, 50) * 1000, percentile(values, 99) * 1000
        return f"{kind} p50 {p50:.1f} ms, p99 {p99:.1f} ms (n={len(values)})"


@dataclass
class Outcome:
    """One request's status, headers, final values (runs) and body text (for findings)."""

    status: int
    headers: httpx.Headers
    values: dict[str, Any] | None
    body: str


def _last_text(values: dict[str, Any] | None) -> str | None:
    messages = (values or {}).get("messages") or []
    if not messages:
        return None
    content = messages[-1].get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _sse_events(text: str) -> list[tuple[str, str]]:
    events = []
    for frame in text.split("\n\n"):
        name, data = "", []
        for line in frame.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if name:
            events.append((name, "\n".join(data)))
    return events


async def _request(
    client: httpx.AsyncClient, tally: Tally, kind: str, path: str, body: dict[str, Any]
) -> Outcome | None:
    started = time.perf_counter()
    try:
        if kind != "stream":
            response = await client.post(path, json=body)
            text = response.text
        else:
            async with client.stream("POST", path, json=body) as response:
                text = (await response.aread()).decode("utf-8", errors="replace")
    except httpx.HTTPError as error:
        tally.find("transport", f"POST {path}: {type(error).__name__}: {error}")
        return None
    tally.latencies[kind].append(time.perf_counter() - started)
    tally.statuses[response.status_code] += 1
    if response.status_code >= 500:
        tally.find("no-5xx", f"POST {path} → {response.status_code}: {text[:_BODY_CHARS]}")
    values: dict[str, Any] | None = None
    if response.status_code < 300:
        try:
            values = _values(kind, path, text, tally)
        except ValueError as error:
            tally.find("body", f"POST {path}: unreadable body ({error}): {text[:_BODY_CHARS]}")
    return Outcome(response.status_code, response.headers, values, text)


def _values(kind: str, path: str, text: str, tally: Tally) -> dict[str, Any] | None:
    """The run's final values (the last `values` event of a stream); `error` events found."""
    if kind != "stream":
        return json.loads(text) if text else None
    values = None
    for name, data in _sse_events(text):
        if name == "error":
            tally.find("stream-error", f"POST {path}: error event {data[:_BODY_CHARS]}")
        elif name == "values":
            values = json.loads(data)
    return values


async def run_turn(
    client: httpx.AsyncClient,
    tally: Tally,
    thread_id: str,
    text: str,
    *,
    stream: bool = False,
    strategy: str | None = None,
    expect: Sequence[int] = (200,),
) -> Outcome | None:
    """One run with one user message; a status outside `expect` or a wrong answer is a finding.

    The answer must be the stub's echo of `text` (``re: <text>`` first): anything else means
    the run answered another request's message.
    """
    body: dict[str, Any] = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": text}]},
    }
    if strategy is not None:
        body["multitask_strategy"] = strategy
    kind = "stream" if stream else "wait"
    path = f"/threads/{thread_id}/runs/{kind}"
    outcome = await _request(client, tally, kind, path, body)
    if outcome is None:
        return None
    if outcome.status not in expect and outcome.status < 500:
        tally.find("status", f"POST {path} → {outcome.status}: {outcome.body[:_BODY_CHARS]}")
    if outcome.status == 200:
        answer = _last_text(outcome.values)
        if answer is None or not answer.startswith(f"re: {text}"):
            tally.find("answer", f"{path} for {text!r} answered {str(answer)[:_BODY_CHARS]!r}")
    return outcome


async def create_thread(client: httpx.AsyncClient, tally: Tally) -> str | None:
    """`POST /threads` (timed as `create`); the new thread's id, or None (a finding)."""
    outcome = await _request(client, tally, "create", "/threads", {})
    if outcome is None or outcome.status != 200 or outcome.values is None:
        if outcome is not None and outcome.status < 500:
            tally.find("status", f"POST /threads → {outcome.status}: {outcome.body[:400]}")
        return None
    return str(outcome.values["thread_id"])


@dataclass
class ThreadAudit:
    """What `check_thread` read: the transcript's user texts and markers, receipts, state size."""

    user_texts: list[str]
    ai_texts: list[str]
    markers: int
    receipts: int
    state_messages: int


async def _get(client: httpx.AsyncClient, tally: Tally, path: str, **params: Any) -> Any:
    response = await client.get(path, params=params)
    if response.status_code != 200:
        tally.find("audit", f"GET {path} → {response.status_code}: {response.text[:400]}")
        return None
    return response.json()


async def check_thread(
    client: httpx.AsyncClient,
    tally: Tally,
    thread_id: str,
    accepted: Sequence[str],
    *,
    refused: Sequence[str] = (),
    ordered: bool = True,
) -> ThreadAudit | None:
    """Check I1 (`accepted`, in order if `ordered`), I1b and that no `refused` text is there."""
    users: list[str] = []
    ais: list[str] = []
    ids: set[str] = set()
    markers, after = 0, 0
    while True:
        path = f"/threads/{thread_id}/transcript"
        page = await _get(client, tally, path, after_seq=after, limit=1000)
        if page is None:
            return None
        for entry in page["entries"]:
            if entry["kind"] != "message":
                markers += 1
                continue
            if entry.get("message_id"):
                ids.add(entry["message_id"])
            message = entry["message"] or {}
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if message.get("type") == "human":
                users.append(text)
            elif message.get("type") == "ai":
                ais.append(text)
        after = page["next_after_seq"]
        if not page["has_more"]:
            break
    wanted = set(accepted)
    seen = [t for t in users if t in wanted]
    missing = [t for t in accepted if t not in set(users)]
    twice = len(seen) - len(set(seen))
    if twice:
        tally.find("I1", f"thread {thread_id}: {twice} accepted message(s) recorded twice")
    if missing:
        tally.find(
            "I1",
            f"thread {thread_id}: {len(missing)} accepted message(s) not in "
            f"/transcript, first {missing[0]!r}",
        )
    elif ordered and seen != list(accepted):
        tally.find("I1", f"thread {thread_id}: accepted messages out of order in /transcript")
    recorded = [t for t in refused if t in set(users)]
    if recorded:
        tally.find(
            "refused-recorded",
            f"thread {thread_id}: a 409-refused message is in /transcript: {recorded[0]!r}",
        )
    state = await _get(client, tally, f"/threads/{thread_id}/state")
    receipts = await _get(client, tally, f"/threads/{thread_id}/compactions", limit=1000)
    if state is None or receipts is None:
        return None
    messages = (state.get("values") or {}).get("messages") or []
    absent = [m.get("id") for m in messages if m.get("id") not in ids]
    if absent:
        tally.find(
            "I1b",
            f"thread {thread_id}: {len(absent)} state message(s) not in "
            f"/transcript, first id {absent[0]}",
        )
    return ThreadAudit(users, ais, markers, len(receipts), len(messages))
