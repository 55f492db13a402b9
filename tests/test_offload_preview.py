"""Previews, rows and the `offloads` reducer: pure functions, examples and properties."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foldwise.offload import (
    MAX_OFFLOAD_EVENTS,
    iter_rows,
    join_rows,
    make_preview,
    merge_offloads,
    one_line_preview,
)

MARKER = re.compile(
    r"\n\[\.\.\. ([\d,]+) characters(?: \(([\d,]+) line breaks\))? omitted \.\.\.\]\n"
)


def _parts(preview: str) -> tuple[str, int, str]:
    found = list(MARKER.finditer(preview))
    assert len(found) == 1, preview
    match = found[0]
    return preview[: match.start()], int(match.group(1).replace(",", "")), preview[match.end() :]


def test_short_text_is_unchanged() -> None:
    assert make_preview("hello\nworld", max_chars=100) == "hello\nworld"


def test_bound_and_reassembly_on_lines() -> None:
    text = "\n".join(f"line {i:05d} " + "word " * 10 for i in range(4000))
    preview = make_preview(text, max_chars=4000)
    assert len(preview) <= 4000
    head, omitted, tail = _parts(preview)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + omitted + len(tail) == len(text)
    # Cut at line boundaries: the head ends where a line ends, the tail starts a line.
    assert text[len(head)] == "\n"
    assert text[len(text) - len(tail) - 1] == "\n"
    assert len(head) > len(tail)  # the head gets the larger share


def test_marker_counts_line_breaks() -> None:
    text = "a\n" * 10_000
    head, _, tail = _parts(make_preview(text, max_chars=500))
    missing = text[len(head) : len(text) - len(tail)]
    assert f"({missing.count(chr(10)):,} line breaks)" in make_preview(text, max_chars=500)


def test_cjk_without_line_breaks_cuts_at_punctuation() -> None:
    text = "长上下文管理需要把大的工具结果存到外面。" * 2000
    preview = make_preview(text, max_chars=1000)
    head, _, tail = _parts(preview)
    assert len(preview) <= 1000
    assert head.endswith("。")
    assert text.startswith(head) and text.endswith(tail)
    assert tail.startswith("长")


def test_json_escapes_are_never_split() -> None:
    payload = [{"name": "caf\u00e9 \U0001f600", "q": 'say "hi"\\', "n": i} for i in range(3000)]
    text = json.dumps(payload)  # ensure_ascii: \u00e9, \ud83d\ude00, \" and \\ escapes
    for budget in range(300, 1400, 37):
        preview = make_preview(text, max_chars=budget)
        head, _, tail = _parts(preview)
        # Every backslash escape in the head and tail is whole.
        assert re.fullmatch(r'(?:[^\\]|\\u[0-9a-f]{4}|\\["\\/bfnrt])*', head), head[-12:]
        assert re.fullmatch(r'(?:[^\\]|\\u[0-9a-f]{4}|\\["\\/bfnrt])*', tail), tail[:12]
        # Surrogate escape pairs stay together.
        assert not re.search(r"\\ud83d$", head) and not tail.startswith("\\ude00")


def test_surrogates_and_combining_marks_are_kept_whole() -> None:
    text = "e\u0301" * 3000 + "🎉" * 3000
    preview = make_preview(text, max_chars=900)
    head, _, tail = _parts(preview)
    assert not unicodedata.combining(tail[0])
    assert head.endswith(("\u0301", "🎉"))


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list('ab \n,{}[]":\\u0123456789é中。😀\r')), max_size=3000
    ),
    max_chars=st.integers(min_value=80, max_value=1500),
)
def test_preview_properties(text: str, max_chars: int) -> None:
    preview = make_preview(text, max_chars=max_chars)
    assert len(preview) <= max_chars
    if len(text) <= max_chars:
        assert preview == text
        return
    head, omitted, tail = _parts(preview)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + omitted + len(tail) == len(text)
    assert omitted > 0


def test_preview_rejects_tiny_budgets() -> None:
    with pytest.raises(ValueError, match="at least"):
        make_preview("x" * 1000, max_chars=10)


def test_one_line_preview() -> None:
    assert one_line_preview("\n\n  first   line here \nsecond") == "first line here"
    assert one_line_preview("x\x00y\tz") == "x y z"
    long = one_line_preview("w" * 500)
    assert len(long) == 120 and long.endswith("…")


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab\n\r中😀")), max_size=400),
    width=st.integers(min_value=1, max_value=9),
    piece=st.integers(min_value=1, max_value=50),
)
def test_rows_round_trip(text: str, width: int, piece: int) -> None:
    pieces = [text[i : i + piece] for i in range(0, len(text), piece)] or [""]
    rows = list(iter_rows(pieces, max_row_chars=width))
    assert join_rows(rows) == text
    assert [r.index for r in rows] == list(range(len(rows)))
    assert all(len(r.text) <= width and "\n" not in r.text for r in rows)
    assert rows == list(iter_rows([text], max_row_chars=width))
    assert sum(not r.continuation for r in rows) == text.count("\n") + 1


def _ref(artifact_id: str, **extra: object) -> dict[str, object]:
    return {"artifact_id": artifact_id, **extra}


def test_merge_offloads_dedupes_keeps_newest_and_removes() -> None:
    left = [_ref("a", v=1), _ref("b", v=1)]
    merged = merge_offloads(left, [_ref("a", v=2), _ref("c")])
    assert merged == [_ref("b", v=1), _ref("a", v=2), _ref("c")]
    assert left == [_ref("a", v=1), _ref("b", v=1)]  # inputs untouched
    assert merge_offloads(merged, [{"artifact_id": "b", "removed": True}]) == [
        _ref("a", v=2),
        _ref("c"),
    ]
    assert merge_offloads(None, _ref("x")) == [_ref("x")]
    assert merge_offloads([{"no": "id"}, "junk"], None) == []


@given(
    st.lists(st.lists(st.sampled_from([f"art_{i}" for i in range(80)]), max_size=30), max_size=8)
)
def test_merge_offloads_properties(batches: list[list[str]]) -> None:
    state: list[dict[str, object]] = []
    order: list[str] = []
    for batch in batches:
        state = merge_offloads(state, [_ref(i) for i in batch])
        for artifact_id in batch:
            if artifact_id in order:
                order.remove(artifact_id)
            order.append(artifact_id)
    ids = [str(e["artifact_id"]) for e in state]
    assert len(ids) == len(set(ids)) <= MAX_OFFLOAD_EVENTS
    assert ids == order[-MAX_OFFLOAD_EVENTS:]
