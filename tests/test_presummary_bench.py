"""`foldwise bench presummary`: the quick run's shape and its hits (timing is not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from foldwise.bench import run_presummary_benchmark
from foldwise.bench._presummary import PresummaryScenario
from foldwise.cli import app


def test_quick_run_compares_off_and_on_with_hits_only_when_on() -> None:
    scenario = PresummaryScenario(
        "tiny", 0.01, summarizer_seconds=0.05, trigger_tokens=10_000, share=0.75, turns=24
    )
    report = run_presummary_benchmark(scenarios=[scenario])
    off, on = report.rows
    assert off["presummarize_at"] is None and on["presummarize_at"] == 0.75
    assert off["compactions"] >= 2 and on["compactions"] >= 2
    assert off["precomputed"] == 0
    assert on["precomputed"] >= 1
    assert on["turns_from_share_to_trigger"] is not None
    for row in report.rows:
        assert row["ordinary_turns"] + row["compactions"] == scenario.turns - 1  # 1st: warm-up
        assert row["ratio"] is not None and row["ratio"] > 0
    markdown = report.to_markdown()
    assert "| tiny |" in markdown and "Load average" in markdown


def test_cli_registers_the_benchmark(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "presummary", "--help"])
    assert result.exit_code == 0
    assert "--quick" in result.stdout
    out = tmp_path / "presummary.json"
    args = ["bench", "presummary", "--quick", "--json", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["benchmark"] == "presummary" and len(data["rows"]) == 2
