"""The crash campaign's checks of I1–I6 (docs/reliability.md) after a kill and a restart.

Everything is read over HTTP from the restarted server, except the lease rows and the memory
queue's claims, read and (for the memory queue, whose claim lease is 60 s) expired in the
database directly. `check_threads` runs, per thread the case touched:

- **I4/I5**: a new run (`/runs/wait`) is sent; a 409 is retried until the dead holder's lease
  has lapsed. The run must succeed (I4), and no 409 may come later than the kill plus the
  lease TTL (I5, with a small allowance for polling);
- then, the new run having recorded what the crash left in the state only:
  **I1** every input answered 2xx is in `/transcript`; **I1b** every state message is;
  **I2** tool calls and results pair up in the state and in every request the model got;
  **I3** the receipts in the state, in `/compactions` and as transcript markers are the same,
  each once (beyond the state's newest `MAX_RECEIPTS`, in the tables only); a summary exists
  iff a compaction happened, and the newest marker carries it;
  every message missing from the state was removed by a compaction (it comes before the
  newest marker); no message is in the transcript twice;
- **I6**: no file outside the configured roots in the server's directory; an artifact of the
  thread is not readable through another thread (404).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from foldwise.bench._reliability import Finding
from foldwise.compaction._receipt import MAX_RECEIPTS

__all__ = ["Ledger", "check_files", "check_threads", "provider_pairing", "user_message"]

_I5_ALLOWANCE = 1.5
"""Seconds beyond the TTL allowed for polling and clock granularity."""
_ALLOWED_TOP = {"foldwise.yaml", "data", "artifacts"}


@dataclass
class Ledger:
    """What the harness knows of one database across its cases.

    Attributes:
        accepted: Thread -> ids of the user messages a 2xx answer accepted.
        threads: Every thread created, in order.
        stub_checked: How many of the stub's requests were already checked for I2.
        cities: Cities the user stated (in accepted messages), for the memory check.
    """

    accepted: dict[str, set[str]] = field(default_factory=dict)
    threads: list[str] = field(default_factory=list)
    stub_checked: int = 0
    cities: set[str] = field(default_factory=set)

    def accept(self, thread_id: str, message_id: str) -> None:
        """Record that the message was accepted on the thread."""
        self.accepted.setdefault(thread_id, set()).add(message_id)


def user_message(message_id: str, text: str) -> dict[str, Any]:
    """A run input holding one user message with a known id."""
    return {"messages": [{"role": "user", "content": text, "id": message_id}]}


def _transcript(client: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.get(
            f"/threads/{thread_id}/transcript", params={"after_seq": after, "limit": 500}
        )
        page.raise_for_status()
        body = page.json()
        entries += body["entries"]
        if not body["has_more"]:
            return entries
        after = body["next_after_seq"]


def _pairing(calls_and_results: Iterable[tuple[str, str]]) -> list[str]:
    """Problems in a sequence of ("call", id) / ("result", id) / ("turn", "") events."""
    problems: list[str] = []
    open_calls: set[str] = set()
    called: set[str] = set()
    for kind, ident in calls_and_results:
        if kind == "call":
            open_calls.add(ident)
            called.add(ident)
        elif kind == "result":
            if ident not in called:
                problems.append(f"tool result {ident} answers no call")
            open_calls.discard(ident)
        elif open_calls:  # another turn starts while calls are unanswered
            problems.append(f"tool call(s) {sorted(open_calls)} without a result")
            open_calls.clear()
    if open_calls:
        problems.append(f"tool call(s) {sorted(open_calls)} without a result at the end")
    return problems


def _state_events(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    for m in messages:
        if m.get("type") == "tool":
            events.append(("result", str(m.get("tool_call_id"))))
            continue
        events.append(("turn", ""))
        events += [("call", str(c.get("id"))) for c in m.get("tool_calls") or []]
    return events


def provider_pairing(requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """I2 on what reached the model: the problems of each request's messages."""
    problems = []
    for index, body in enumerate(requests):
        events: list[tuple[str, str]] = []
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                events.append(("result", str(m.get("tool_call_id"))))
                continue
            events.append(("turn", ""))
            events += [("call", str(c.get("id"))) for c in m.get("tool_calls") or []]
        problems += [f"request {index}: {p}" for p in _pairing(events)]
    return problems


def _new_run(
    client: httpx.Client, thread_id: str, message_id: str, deadline: float
) -> tuple[httpx.Response | None, float, str]:
    """Send a run until the thread accepts it or `deadline`.

    Returns the answer, when the last refused (409) request started (0: none) and its text.
    """
    body = {"assistant_id": "agent", "input": user_message(message_id, "Hello again after it.")}
    refused = ""
    last_refusal = 0.0
    while True:
        started = time.time()
        try:
            answer = client.post(f"/threads/{thread_id}/runs/wait", json=body)
        except httpx.TransportError as error:
            answer, refused = None, repr(error)
        if answer is not None and answer.status_code != 409:
            return answer, last_refusal, refused
        if answer is not None:
            refused, last_refusal = answer.text[:160], started
        if time.time() > deadline:
            return answer, last_refusal, refused
        time.sleep(0.1)


def _i3(
    state: Mapping[str, Any],
    receipts: list[dict[str, Any]],
    entries: list[dict[str, Any]],
    run_status: Mapping[str, str],
) -> list[str]:
    problems = []
    in_state = [str(r.get("id")) for r in state.get("compactions") or []]
    stored = [str(r.get("id")) for r in receipts]
    markers = [e for e in entries if e["kind"] == "compaction"]
    marked = [str(e["message"].get("receipt_id")) for e in markers]
    if not (sorted(in_state) == sorted(stored) == sorted(marked)):
        every = set(in_state) | set(stored) | set(marked)
        odd = {
            r: "".join(
                flag if r in where else "-"
                for flag, where in (("S", in_state), ("R", stored), ("M", marked))
            )
            for r in sorted(every)
        }
        # The state keeps the newest `MAX_RECEIPTS`: older ones are in the tables only.
        oldest = stored.index(in_state[0]) if in_state and in_state[0] in stored else 0
        trimmed = set(stored[:oldest]) if len(in_state) >= MAX_RECEIPTS else set()
        half = {r: f for r, f in odd.items() if f != "SRM" and not (f == "-RM" and r in trimmed)}
        if half:
            problems.append(f"receipts not in all of state/receipts/markers (SRM): {half}")
    if len(set(marked)) != len(marked) or len(set(stored)) != len(stored):
        problems.append(f"a receipt recorded twice: stored {stored}, markers {marked}")
    summary = state.get("summary_text")
    if bool(in_state) != bool(summary):
        problems.append(f"{len(in_state)} compaction(s) but summary {summary!r:.60}")
    last_summary = markers[-1]["message"].get("summary") if markers else None
    if last_summary is not None and last_summary != summary:
        problems.append("the newest marker's summary is not the state's summary")
    kept = {str(m.get("id")) for m in state.get("messages") or []}
    last_marker = max((i for i, e in enumerate(entries) if e["kind"] == "compaction"), default=-1)
    for index, entry in enumerate(entries):
        if entry["kind"] != "message" or entry["message_id"] in kept or index < last_marker:
            continue
        # Recorded, never committed to the state: only a run that died may leave that.
        if run_status.get(str(entry.get("run_id"))) != "error":
            problems.append(f"message {entry['message_id']} left the state without a compaction")
    return problems


def _check_thread(
    client: httpx.Client, case: str, thread_id: str, ledger: Ledger, kill_time: float, ttl: float
) -> list[Finding]:
    found: list[Finding] = []
    probe = f"probe-{case}-{thread_id}"[:120]
    answer, refused_at, refused = _new_run(client, thread_id, probe, kill_time + ttl + 10)
    if answer is None or answer.status_code != 200:
        detail = "no answer" if answer is None else f"{answer.status_code} {answer.text[:160]}"
        return [Finding(case, "I4", f"thread {thread_id}: a new run failed: {detail}")]
    ledger.accept(thread_id, probe)
    # Refused after the dead holder's lease had lapsed (the restart's own time is not counted).
    if refused_at > kill_time + ttl + _I5_ALLOWANCE:
        late = refused_at - kill_time
        detail = f"thread {thread_id} blocked {late:.1f} s (TTL {ttl}); last refusal: {refused}"
        found.append(Finding(case, "I5", detail))
    state = client.get(f"/threads/{thread_id}/state").json()["values"]
    entries = _transcript(client, thread_id)
    receipts = client.get(f"/threads/{thread_id}/compactions").json()
    recorded = [e["message_id"] for e in entries if e["kind"] == "message"]
    missing = sorted(ledger.accepted.get(thread_id, set()) - set(recorded))
    if missing:
        found.append(Finding(case, "I1", f"thread {thread_id}: accepted {missing} not recorded"))
    unrecorded = [m.get("id") for m in state.get("messages") or [] if m.get("id") not in recorded]
    if unrecorded:
        found.append(Finding(case, "I1b", f"thread {thread_id}: state-only {unrecorded}"))
    if len(set(recorded)) != len(recorded):
        twice = sorted({i for i in recorded if recorded.count(i) > 1})
        found.append(Finding(case, "I1", f"thread {thread_id}: recorded twice {twice}"))
    for problem in _pairing(_state_events(state.get("messages") or [])):
        found.append(Finding(case, "I2", f"thread {thread_id} state: {problem}"))
    runs = client.get(f"/threads/{thread_id}/runs", params={"limit": 1000}).json()
    run_status = {str(r["run_id"]): str(r["status"]) for r in runs}
    for problem in _i3(state, receipts, entries, run_status):
        found.append(Finding(case, "I3", f"thread {thread_id}: {problem}"))
    found += _cross_thread(client, case, thread_id, ledger)
    return found


def _cross_thread(client: httpx.Client, case: str, thread_id: str, ledger: Ledger) -> list[Finding]:
    others = [t for t in ledger.threads if t != thread_id]
    listed = client.get(f"/threads/{thread_id}/artifacts")
    if not others or listed.status_code != 200:
        return []
    body = listed.json()
    items = body if isinstance(body, list) else body.get("artifacts") or body.get("items") or []
    found = []
    for item in items[:2]:
        artifact_id = item.get("artifact_id") or item.get("id")
        leak = client.get(f"/threads/{others[0]}/artifacts/{artifact_id}")
        if leak.status_code != 404:
            found.append(
                Finding(case, "I6", f"artifact {artifact_id} of {thread_id} read via {others[0]}")
            )
    return found


def check_threads(
    url: str, case: str, threads: Sequence[str], ledger: Ledger, kill_time: float, ttl: float
) -> list[Finding]:
    """I1–I5 and the artifact part of I6 for each thread the case touched."""
    found: list[Finding] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for thread_id in threads:
            try:
                found += _check_thread(client, case, thread_id, ledger, kill_time, ttl)
            except (httpx.HTTPError, KeyError, ValueError) as error:
                found.append(Finding(case, "I4", f"thread {thread_id}: {error!r:.200}"))
    return found


def check_files(case: str, server_dir: Path) -> list[Finding]:
    """I6: nothing in the server's directory outside the database and artifact roots."""
    stray = sorted(p.name for p in server_dir.iterdir() if p.name not in _ALLOWED_TOP)
    return [Finding(case, "I6", f"files outside the roots: {stray}")] if stray else []
