"""The benchmark suite: scenarios, metrics, targets, JSON and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foldwise.bench._suite import SUITE_SYSTEMS, run_bench_suite
from foldwise.bench._suite_scenarios import FACT_CATEGORIES, fact_scenario, suite_scenarios


def test_scenarios_are_deterministic_and_plant_facts() -> None:
    a = fact_scenario("zh", turns=30)
    b = fact_scenario("zh", turns=30)
    assert [m.text for m in a.messages] == [m.text for m in b.messages]
    assert len(a.facts) == 10 * len(FACT_CATEGORIES)
    assert sum(f.superseded for f in a.facts) == 9  # every plan but the newest
    text = "\n".join(m.text for m in a.messages) + repr(
        [getattr(m, "tool_calls", "") for m in a.messages]
    )
    assert all(f.key in text for f in a.facts)
    keys = [s.key for s in suite_scenarios(quick=True)]
    assert keys == [
        "en_prose",
        "zh_prose",
        "json_numeric",
        "json_zh_ascii",
        "huge_tool_result",
        "facts_en",
        "facts_zh",
    ]


def test_suite_on_two_scenarios(tmp_path: Path) -> None:
    result = run_bench_suite(
        quick=True,
        counting=False,
        scenarios=["huge_tool_result", "proposal_review"],
        systems=("foldwise", "langchain", "deepagents"),
        results_dir=tmp_path,
    )
    assert result.written is not None and result.written.parent == tmp_path
    assert result.written.name.endswith("-quick.json")
    assert result.written.with_suffix(".md").read_text("utf-8") == result.to_markdown()
    data = json.loads(result.written.read_text("utf-8"))
    assert data["environment"]["nproc"] and data["environment"]["versions"]["langchain"]
    huge = data["results"]["huge_tool_result"]
    assert huge["foldwise"]["overflow_rejections"] == 0
    assert huge["langchain"]["overflow_rejections"] > 0  # a 300k-token result in a 128k window
    assert huge["foldwise"]["cost_usd"] < huge["langchain"]["cost_usd"]
    names = {t["name"]: t["met"] for t in data["targets"]}
    assert names["foldwise: zero overflow rejections on every scenario (M1)"] is True
    assert names["foldwise: 100% of human messages verbatim or recoverable (M4)"] is True
    markdown = result.to_markdown()
    assert "| scenario | foldwise / LangChain default | foldwise / deepagents |" in markdown
    assert "## M1 overflow" in markdown and "## M5 planted facts" in markdown


def test_unknown_names_fail_fast() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        run_bench_suite(quick=True, counting=False, scenarios=["nope"])
    with pytest.raises(ValueError, match="unknown system"):
        run_bench_suite(quick=True, counting=False, systems=("foldwise", "letta"))


@pytest.mark.slow
def test_quick_suite_end_to_end(tmp_path: Path) -> None:
    result = run_bench_suite(quick=True, results_dir=tmp_path)
    assert set(result.results["en_prose"]) == set(SUITE_SYSTEMS)
    assert {"tokens", "decision"} <= set(result.counting)
    assert all(t["met"] for t in result.targets[:3])
    assert "T0 counting: tokens" in result.to_markdown()
    facts = result.results["facts_en"]["foldwise"]["facts"]
    assert set(facts["by_category"]) == set(FACT_CATEGORIES)
