"""The kill test (issue 13's Done-means), fast variant: SIGKILL the writer at seeded points.

`run_memory_kill_benchmark` forks producer + worker processes that SIGKILL themselves at a
seeded crash point each round (between enqueue, the debounce wait, claim, extraction, the
apply's commit and the queue row's completion), restarts them, and checks the database: every
update applied, no twin facts, no half-applied supersession, nothing from a compaction that
never committed, the same facts as a crash-free run. The benchmark runs 200+ points.
"""

from __future__ import annotations

import pytest

from foldwise.bench._memory_kill import run_memory_kill_benchmark
from tests.support.gateway import drop_schema, postgres_url


def test_sqlite_survives_twenty_kills() -> None:
    report = run_memory_kill_benchmark(20, seed=7)
    assert report.points == 20
    assert len(report.kills_by_point) >= 5  # the seeds spread over the crash points
    assert report.updates > 100
    assert report.applied == report.updates and report.applied_percent == 100.0
    assert report.duplicates == report.half_applied == report.uncommitted_applied == 0
    assert report.state_mismatches == report.live_rows == report.dead_letters == 0
    assert report.ok


@pytest.mark.postgres
def test_postgres_with_two_workers_survives_kills() -> None:
    url, dsn, schema = postgres_url()
    try:
        report = run_memory_kill_benchmark(10, url=url, workers=2, seed=11)
    finally:
        drop_schema(dsn, schema)
    assert report.points == 10 and report.workers == 2
    assert report.applied == report.updates > 50
    assert report.duplicates == report.half_applied == report.uncommitted_applied == 0
    assert report.state_mismatches == report.live_rows == report.dead_letters == 0
    assert report.ok
