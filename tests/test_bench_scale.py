"""`foldwise bench scale`: the report, the marked section it writes, and a real small run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foldwise.bench._gateway_scale import (
    BEGIN_MARK,
    END_MARK,
    ScaleReport,
    ScaleRow,
    _with_speedups,
    run_scale_benchmark,
    write_scale_section,
)
from foldwise.cli import app


def _row(processes: int, workload: str, ops: float) -> ScaleRow:
    return ScaleRow(
        backend="postgres",
        processes=processes,
        workload=workload,
        clients=4,
        seconds=3.0,
        operations=int(ops * 3),
        errors=0,
        ops_per_second=ops,
        p50_ms=10.0,
        p99_ms=20.0,
        client_cpu_share=0.3,
        load_before=1.0,
        load_after=1.5,
    )


def test_speedups_are_against_the_same_workload_with_one_process() -> None:
    rows = _with_speedups(
        [_row(1, "create_wait", 40.0), _row(2, "create_wait", 70.0), _row(2, "mixed", 30.0)]
    )
    assert [r.speedup for r in rows] == [1.0, 1.75, None]  # no one-process mixed row


def test_the_section_is_replaced_between_its_markers(tmp_path: Path) -> None:
    doc = tmp_path / "deployment.md"
    doc.write_text(f"# Deploy\n\nbefore\n\n{BEGIN_MARK}\nold table\n{END_MARK}\n\nafter\n")
    report = ScaleReport(_with_speedups([_row(1, "create_wait", 40.0)]), 4, 3.0, 2, "Linux")
    write_scale_section(doc, report)
    text = doc.read_text()
    assert "old table" not in text and text.startswith("# Deploy\n\nbefore\n")
    assert text.rstrip().endswith("after")
    assert "| postgres | 1 | create_wait | 40.0 | 1.00x | 10.0 | 20.0 | 0 |" in text
    write_scale_section(doc, report)  # idempotent
    assert doc.read_text() == text


def test_bad_arguments_are_refused_naming_the_option() -> None:
    result = CliRunner().invoke(app, ["bench", "scale", "--processes", "1,zero"])
    assert result.exit_code == 2 and "--processes" in result.output
    with pytest.raises(ValueError, match="--postgres"):
        run_scale_benchmark(processes=[1], postgres_url=None)


def test_a_small_run_on_sqlite(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    options = ["--processes", "1", "--clients", "2", "--seconds", "1", "--storage", "sqlite"]
    result = CliRunner().invoke(app, ["bench", "scale", *options, "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [(r["backend"], r["processes"], r["workload"]) for r in rows] == [
        ("sqlite", 1, "create_wait"),
        ("sqlite", 1, "mixed"),
    ]
    for row in rows:
        assert row["errors"] == 0, row["error_samples"]
        assert row["operations"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
        assert row["speedup"] == 1.0
