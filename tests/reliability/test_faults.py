"""Faults of the world, short form (issue 15 item 2): every case meets its written expectation.

Runs `foldwise.bench._rel_faults.run` as `make test` does: two real `foldwise serve` processes
on the OpenAI stub; the PostgreSQL restart row is full-form only (`foldwise bench reliability
--area faults --postgres URL`).
"""

from __future__ import annotations

from pathlib import Path

from foldwise.bench._rel_faults import CASES, run
from foldwise.bench._reliability import AreaOptions


def test_faults_of_the_world_short_form(tmp_path: Path) -> None:
    rows = run(AreaOptions(full=False, workdir=tmp_path, seed=0, postgres_url=None))
    found = [v.line() for row in rows for v in row.violations]
    assert found == [], "\n".join(found)
    tried = {note.split(":")[0] for row in rows for note in row.notes}
    short_cases = {c for c in CASES if "PostgreSQL" not in c and "3x" not in c}
    missing = {c.split(":")[0] for c in short_cases} - tried
    assert not missing, f"cases not tried: {sorted(missing)}"
    assert sum(row.cases for row in rows) >= len(short_cases)
    assert all("--area faults" in row.command for row in rows)
