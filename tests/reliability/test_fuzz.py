"""The fuzzing area's short form (`make test`): schema-generated and hand-written requests
against the gateway in-process, SQLite and PostgreSQL; every row must find no violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from foldwise.bench._rel_fuzz import run, run_backend
from foldwise.bench._reliability import AreaOptions, AreaResult
from tests.support.gateway import drop_schema, postgres_url

MIN_SCHEMA_CASES = 300
"""60 operations x 3 examples x (positive + negative where a schema can be broken)."""
MIN_MALFORMED_CASES = 2_500
"""Sizes, nesting, encodings, content types, keys, auth, integers and ids: every one."""


def _passed(row: AreaResult, minimum: int) -> None:
    assert row.violations == [], "\n".join(v.line() for v in row.violations[:20])
    assert row.cases >= minimum, row


def test_fuzz_short_form_sqlite(tmp_path: Path) -> None:
    rows = run(AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=None))
    by_area = {row.area: row for row in rows}
    _passed(by_area["fuzzing, OpenAPI schema, SQLite"], MIN_SCHEMA_CASES)
    _passed(by_area["fuzzing, malformed requests, SQLite"], MIN_MALFORMED_CASES)
    skipped = by_area["fuzzing, malformed requests, PostgreSQL"]
    assert skipped.cases == 0 and skipped.notes[0].startswith("skipped")


@pytest.mark.postgres
def test_fuzz_short_form_postgres(tmp_path: Path) -> None:
    url, dsn, schema = postgres_url()
    base = url.split("?", 1)[0]
    try:
        options = AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=base)
        rows = run_backend(options, postgres=True)
    finally:
        drop_schema(dsn, schema)
    by_area = {row.area: row for row in rows}
    _passed(by_area["fuzzing, malformed requests, PostgreSQL"], 1_000)
