"""The load area's short form (`foldwise bench reliability --area load --short`).

L1 (20 clients × 5 s), L2 (10 clients contending on one thread, then enqueued) and L3 (2
threads × 30 turns with compactions) against a real `foldwise serve` on the OpenAI stub: no
5xx, no unexpected status, every invariant held. The figures are the full form's business.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from foldwise.bench._rel_load import run, run_backends
from foldwise.bench._reliability import AreaOptions, AreaResult
from tests.support.gateway import drop_schema, postgres_url

MINIMUM_CASES = {"L1": 20, "L2": 40, "L3": 60}
"""Cases each row must have tried: L1 requests, L2 contending runs, L3 turns."""


def _check(rows: list[AreaResult], label: str) -> None:
    measured = [row for row in rows if label in row.area]
    assert [row.area.split()[1] for row in measured] == ["L1", "L2", "L3"]
    for row in measured:
        assert row.violations == [], "\n".join(v.line() for v in row.violations)
        assert row.cases >= MINIMUM_CASES[row.area.split()[1]], row.area
        assert row.command.startswith("foldwise bench reliability --area load --seed 0 --short")


def test_load_short_form_on_sqlite(tmp_path: Path) -> None:
    rows = run(AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=None))
    _check(rows, "SQLite")
    skipped = [row for row in rows if "PostgreSQL" in row.area]
    assert [row.cases for row in skipped] == [0]
    assert "skipped" in skipped[0].notes[0]


@pytest.mark.postgres
def test_load_short_form_on_postgres(tmp_path: Path) -> None:
    url, dsn, schema = postgres_url()
    try:
        options = AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=url)
        _check(run_backends(options, ("postgres",)), "PostgreSQL")
    finally:
        drop_schema(dsn, schema)
