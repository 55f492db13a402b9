"""Crash points, short form: 20 named points on SQLite, each a real SIGKILL, a restart, I1–I6.

The full form (200 points on SQLite, 50 on PostgreSQL with two workers) is `foldwise bench
reliability --area crash`. The checks themselves are tested on hand-made states below, so a
clean run means the invariants held, not that nothing was looked at.
"""

from __future__ import annotations

from pathlib import Path

from foldwise._crash import CRASH_POINTS
from foldwise.bench._rel_crash import SHORT_CASES, plan_cases, run
from foldwise.bench._rel_crash_checks import _i3, _pairing, _state_events, provider_pairing
from foldwise.bench._reliability import AreaOptions
from foldwise.compaction._receipt import MAX_RECEIPTS


def test_short_form_kills_at_20_named_points_without_a_violation(tmp_path: Path) -> None:
    rows = run(AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=None))
    sqlite = rows[0]
    assert sqlite.area == "crash points, SQLite"
    assert sqlite.cases >= SHORT_CASES
    assert sqlite.violations == [], "\n".join(v.line() for v in sqlite.violations)
    assert not any("not reached" in note for note in sqlite.notes), sqlite.notes
    assert rows[1].cases == 0 and rows[1].violations == []  # PostgreSQL: the full form only


def test_the_plan_covers_every_point_and_is_seeded() -> None:
    full = plan_cases(200, 7, named_only=False)
    assert {c.point for c in full if c.point} == set(CRASH_POINTS)
    assert sum(c.point is None for c in full) >= 60  # random-time kills
    assert plan_cases(200, 7, named_only=False) == full
    short = plan_cases(SHORT_CASES, 0, named_only=True)
    assert len({c.point for c in short}) == SHORT_CASES


def test_pairing_finds_open_calls_and_orphan_results() -> None:
    state = [
        {"type": "human", "id": "h"},
        {"type": "ai", "id": "a", "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
        {"type": "tool", "id": "t", "tool_call_id": "c1"},
        {"type": "human", "id": "h2"},
        {"type": "tool", "id": "t9", "tool_call_id": "c9"},
    ]
    problems = _pairing(_state_events(state))
    assert problems == ["tool call(s) ['c2'] without a result", "tool result c9 answers no call"]
    sent = [{"messages": [{"role": "assistant", "tool_calls": [{"id": "x"}]}]}]
    assert provider_pairing(sent) == ["request 0: tool call(s) ['x'] without a result at the end"]


def test_i3_finds_a_half_applied_compaction() -> None:
    receipt = {"id": "cmp_1"}
    marker = {"kind": "compaction", "message": {"receipt_id": "cmp_1", "summary": "S"}}
    message = {"kind": "message", "message_id": "m1", "run_id": "r1"}
    whole = {"compactions": [receipt], "summary_text": "S", "messages": []}
    assert _i3(whole, [receipt], [message, marker], {"r1": "success"}) == []
    # The receipt in the state only (not stored, no marker).
    assert _i3(whole, [], [message], {"r1": "success"})
    # A summary without a compaction.
    assert _i3({"summary_text": "S", "messages": []}, [], [], {})
    # A message of a finished run gone from the state with no compaction after it.
    assert _i3({"messages": []}, [], [message], {"r1": "success"}) == [
        "message m1 left the state without a compaction"
    ]
    # ...but a dead run's recorded input that never reached the state is not a removal.
    assert _i3({"messages": []}, [], [message], {"r1": "error"}) == []


def test_i3_allows_receipts_the_state_no_longer_keeps() -> None:
    stored = [{"id": f"cmp_{i}"} for i in range(MAX_RECEIPTS + 1)]
    markers = [{"kind": "compaction", "message": {"receipt_id": r["id"]}} for r in stored]
    state = {"compactions": stored[1:], "summary_text": "S", "messages": []}
    assert _i3(state, stored, markers, {}) == []
    # The newest receipt missing from the state is a half-applied compaction, not a trim.
    state = {"compactions": stored[:-1], "summary_text": "S", "messages": []}
    assert _i3(state, stored, markers, {})
