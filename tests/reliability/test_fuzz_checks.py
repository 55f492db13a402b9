"""The fuzzing area's checks find what they are meant to find (so a zero means something)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from foldwise.bench._rel_fuzz_cases import HUGE_INTS, integer_fields
from foldwise.bench._rel_fuzz_target import Sent, check_response, fuzz_config, hidden_routes
from foldwise.gateway import create_app


def _invariants(status: int, body: bytes, field: str | None = None) -> list[str]:
    return [f.invariant for f in check_response(Sent("case", status, body, field))]


def test_a_clean_answer_passes() -> None:
    assert _invariants(200, b'{"threads": []}') == []
    assert _invariants(422, b'{"detail": "limit: must be at most 1000"}', "limit") == []
    assert _invariants(400, b'{"detail": "body: could not be parsed"}', "limit|body") == []
    assert _invariants(409, b'{"detail": "thread busy"}', "limit") == []  # not a field error


def test_server_errors_and_leaks_are_violations() -> None:
    assert _invariants(500, b'{"detail": "internal error"}') == ["no-5xx"]
    assert _invariants(503, b'{"detail": "x"}') == ["no-5xx"]
    trace = b'Traceback (most recent call last):\n  File "/app/x.py", line 3, in f'
    assert "no-traceback" in _invariants(200, trace)
    assert _invariants(200, b'{"v": "<foldwise.x.Thing object at 0x7f00aa>"}') == ["no-traceback"]
    assert _invariants(422, b'{"detail": "OverflowError: int too big"}') == ["no-traceback"]


def test_client_errors_need_a_detail_naming_the_field() -> None:
    assert _invariants(404, b"not json") == ["detail"]
    assert _invariants(422, b'{"errors": []}') == ["detail"]
    assert _invariants(422, b'{"detail": "invalid request"}', "offset") == ["detail-names-field"]
    assert _invariants(422, b'{"detail": "invalid request"}') == ["detail-names-field"]
    assert _invariants(422, b'{"detail": "input.messages[0].role: missing"}') == []
    assert _invariants(422, '{"detail": "values.W?\u00e9: only values.messages"}'.encode()) == []
    assert _invariants(422, b'{"detail": "invalid thread id \'..\': use a UUID"}') == []


def test_schema_fields_and_hidden_routes_are_found(tmp_path: Path) -> None:
    app = create_app(fuzz_config(tmp_path))
    fields = {(f.method, f.path, f.name): f for f in integer_fields(app.openapi())}
    offset = fields[("POST", "/threads/search", "offset")]
    # pydantic writes the body's maximum as the float 2^63, which 2^63 itself does not exceed.
    assert all(offset.refuses(value) for value in HUGE_INTS if value != 2**63)
    assert not offset.refuses(2**63 - 1)
    assert ("GET", "/threads/{thread_id}/transcript", "after_seq") in fields
    assert ("PATCH", "/memory/facts/{fact_id}", "expected_revision") in fields
    hidden = hidden_routes(app)
    assert ("GET", "/ui/{asset:path}") in hidden and ("POST", "/assistants") in hidden
    paths = app.openapi()["paths"]
    in_schema = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    assert not set(hidden) & in_schema


def test_schema_row_says_skipped_without_schemathesis(monkeypatch: pytest.MonkeyPatch) -> None:
    from foldwise.bench._rel_fuzz_schema import run_schema

    monkeypatch.setitem(sys.modules, "schemathesis", None)  # `import schemathesis` fails
    row = run_schema(object(), "fuzzing, OpenAPI schema, SQLite", "cmd", 3, 0)  # type: ignore[arg-type]
    assert (row.cases, row.violations) == (0, [])
    assert row.notes == ["skipped: schemathesis not installed"]
