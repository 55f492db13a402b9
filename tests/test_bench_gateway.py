"""`foldwise bench gateway`: the quick run end to end, the report's shape, the poll patch."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foldwise.bench._gateway_bench import (
    BEGIN_MARK,
    END_MARK,
    FAST,
    SHIPPED,
    SQLITE,
    GatewayBenchReport,
    write_gateway_report,
)
from foldwise.bench._gateway_measure import (
    ColumnResult,
    Sizes,
    _growing,
    _Lane,
    _sequential,
    growth_fit,
    paired_growth,
)
from foldwise.bench._gateway_render import checks
from foldwise.bench._gateway_targets import Target, langgraph_unavailable
from foldwise.cli import app

CHILD = Path(__file__).resolve().parents[1] / "src" / "foldwise" / "bench" / "_gateway_lg_child.py"
TIMED = (
    "create_wait_p50",
    "create_wait_p99",
    "turns_p50",
    "requests_per_second",
    "stream_first_event_p50",
)


def _sane(column: dict[str, object]) -> None:
    for key in TIMED:
        value = column[key]
        assert isinstance(value, float)
        assert 0 < value < 60_000, (column["label"], key, value)
    assert column["create_wait_p99"] >= column["create_wait_p50"]  # type: ignore[operator]
    assert column["sequential_samples"] and column["stream_samples"]
    assert column["concurrent_requests"] and column["concurrent_errors"] == 0
    assert [len(t) for t in column["turn_latencies"]] == [6]  # type: ignore[attr-defined]
    assert 10 < column["rss_after_mib"] < 4096  # type: ignore[operator]
    assert column["rss_samples"] >= 1


def test_quick_run_end_to_end(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nhand-written text\n", "utf-8")
    work = tmp_path / "work"
    options = ["--quick", "--json", "--write", str(doc), "--workdir", str(work)]
    result = CliRunner().invoke(app, ["bench", "gateway", *options], catch_exceptions=False)
    data = json.loads(result.output)
    assert result.exit_code == (0 if data["passed"] else 1), result.output
    labels = [c["label"] for c in data["columns"]]
    reason = langgraph_unavailable()
    if reason is None:
        assert labels == [SHIPPED, FAST, SQLITE]
        assert data["unavailable"] == {}
        # the 5 ms column's server ran with the shortened poll, the other as shipped (said in
        # their logs; no timing asserted here: the machine is shared)
        patched = "Runs.next: asyncio.sleep(0.5) -> asyncio.sleep(0.005)"
        assert all(patched in log.read_text() for log in (work / "lg5").glob("langgraph-*.log"))
        assert not any(patched in log.read_text() for log in (work / "lg").glob("langgraph-*.log"))
        assert list((work / "lg5").glob("langgraph-*.log"))
        assert set(data["ratios_foldwise_over_langgraph_5ms"][SQLITE]) >= {
            "create thread + runs.wait p50 (ms)",
            "2 clients x 2 s, requests/s",
        }
    else:
        assert labels == [SQLITE]
        assert data["unavailable"] == {SHIPPED: reason, FAST: reason}
    for column in data["columns"]:
        _sane(column)
    assert [t["check"].split(":")[0] for t in data["targets"]] == [SQLITE] * 6
    text = doc.read_text("utf-8")
    assert text.startswith("# Benchmarks\n\nhand-written text\n")
    assert BEGIN_MARK in text and END_MARK in text
    assert "| create thread + runs.wait p50 (ms) |" in text
    assert "| growing threads, turns 4-6 p50 (ms) |" in text


def _column(label: str, p50: float, growth: float, rss: list[int] | None = None) -> ColumnResult:
    return ColumnResult(
        label,
        create_wait_p50=p50,
        create_wait_p99=p50 * 1.5,
        turns_p50=p50,
        turns_window="181-200",
        growth_ms_per_turn=growth,
        requests_per_second=1000 / p50,
        stream_first_event_p50=p50 / 2,
        rss_after_mib=120,
        rss_growth_mib=0.5,
        rss_flat=True,
        rss_samples=30,
    )


def test_report_without_langgraph_says_why_and_checks_the_fallback_growth() -> None:
    report = GatewayBenchReport(
        [_column(SQLITE, 12.0, 0.2)],
        unavailable={SHIPPED: "langgraph_cli not installed", FAST: "langgraph_cli not installed"},
        sizes={"clients": 16, "seconds": 30},
    )
    text = report.to_markdown()
    assert f"- {FAST}: unavailable: langgraph_cli not installed" in text
    assert "| 16 clients x 30 s, requests/s | unavailable | unavailable | 83.3 | — |" in text
    verdicts = {name: ok for name, _, ok in checks(report)}
    assert verdicts[f"{SQLITE}: p50 ≤ 14 ms"] is True
    assert verdicts[f"{SQLITE}: p99 ≤ 25 ms"] is True  # 18 ms
    assert verdicts[f"{SQLITE}: ≥ 80 requests/s"] is True
    assert verdicts[f"{SQLITE}: growth ≤ +0.300 ms/turn (issue 16's 0.3, no LangGraph)"] is True
    assert report.to_dict()["ratios_foldwise_over_langgraph_5ms"] == {}


def test_growth_is_judged_against_langgraph_in_the_same_run() -> None:
    report = GatewayBenchReport(
        [_column(FAST, 10.0, 0.25), _column(SQLITE, 20.0, 0.4)], sizes={"clients": 16}
    )
    verdicts = {name: ok for name, _, ok in checks(report)}
    assert verdicts[f"{SQLITE}: growth ≤ +0.250 ms/turn (LangGraph-5ms in this run)"] is False
    assert verdicts[f"{SQLITE}: p50 ≤ 14 ms"] is False
    assert not report.passed
    ratios = report.to_dict()["ratios_foldwise_over_langgraph_5ms"][SQLITE]
    assert ratios["create thread + runs.wait p50 (ms)"] == 2.0
    assert "| create thread + runs.wait p50 (ms) | 10.0 | 20.0 | 2.00 |" in report.to_markdown()


def test_write_replaces_only_the_marked_section(tmp_path: Path) -> None:
    doc = tmp_path / "b.md"
    report = GatewayBenchReport([_column(SQLITE, 12.0, 0.1)], sizes={})
    doc.write_text(f"intro\n\n{BEGIN_MARK}\nold table\n{END_MARK}\n\noutro\n", "utf-8")
    write_gateway_report(doc, report)
    text = doc.read_text("utf-8")
    assert "old table" not in text
    assert text.startswith("intro\n\n" + BEGIN_MARK) and text.endswith(f"{END_MARK}\n\noutro\n")


def test_the_poll_patch_replaces_the_half_second_sleep() -> None:
    if langgraph_unavailable() is not None:
        pytest.skip(langgraph_unavailable() or "")
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('child', {str(CHILD)!r})\n"
        "child = importlib.util.module_from_spec(spec); spec.loader.exec_module(child)\n"
        "print(child.shorten_poll(0.005))\n"
        "from langgraph_runtime_inmem import ops\n"
        "print(sorted(c for c in ops.Runs.next.__code__.co_consts if isinstance(c, float)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    note, consts = done.stdout.strip().splitlines()
    assert note.endswith("asyncio.sleep(0.5) -> asyncio.sleep(0.005)")
    assert "0.005" in consts and "0.5" not in consts


class _Recording:
    """A langgraph_sdk client double: answers like the stub and logs which server was asked."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log
        self.threads, self.runs = self, self

    async def create(self) -> dict[str, str]:
        return {"thread_id": "t"}

    async def wait(self, thread_id: str, assistant: str, *, input: Any) -> dict[str, Any]:
        self.log.append(self.label)
        text = input["messages"][0]["content"]
        return {"messages": [{"content": f"re: {text}"}]}


def _recording_lanes(log: list[str]) -> list[_Lane]:
    """Servers A and B, each answering through a `_Recording` client that logs into `log`."""
    return [
        _Lane(Target(name, "http://x", 1), _Recording(name, log), ColumnResult(name))
        for name in ("A", "B")
    ]


async def test_side_by_side_targets_take_turns_in_alternating_order() -> None:
    log: list[str] = []
    lanes = _recording_lanes(log)
    sizes = Sizes(sequential=3, warmup=1, turns=4, window=2, clients=1, seconds=1, streams=1)
    await _sequential(lanes, sizes)
    assert log == ["A", "B", "B", "A", "A", "B", "B", "A"]  # warm-up round, then 3 measured
    assert [lane.result.sequential_samples for lane in lanes] == [3, 3]
    log.clear()
    await _growing(lanes, sizes)
    assert log == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert [[len(t) for t in lane.result.turn_latencies] for lane in lanes] == [[4], [4]]


async def test_growing_threads_take_turns_within_each_turn() -> None:
    log: list[str] = []
    lanes = _recording_lanes(log)
    sizes = Sizes(sequential=1, warmup=0, turns=3, window=2, clients=1, seconds=1, streams=1)
    await _growing(lanes, replace(sizes, threads=2))
    # each turn: thread 1, then thread 2; on each thread the servers swap from turn to turn
    assert log == ["A", "B", "B", "A", "B", "A", "A", "B", "A", "B", "B", "A"]
    assert [[len(t) for t in lane.result.turn_latencies] for lane in lanes] == [[3, 3], [3, 3]]
    assert all(lane.result.turns_window == "2-3" for lane in lanes)
    # LangGraph as shipped (0.5 s a run) grows one thread only
    assert replace(sizes, threads=3).capped(2, 1).threads == 1


def test_growth_fit_is_least_squares_with_its_standard_error() -> None:
    exact = growth_fit([[10.0 + 0.5 * t for t in range(1, 201)]] * 3)
    assert exact.slope == pytest.approx(0.5)
    assert exact.standard_error == pytest.approx(0.0, abs=1e-9)
    # 1, 3, 2, 4 at turns 1-4: the line 0.5 + 0.8 t, residuals -0.3 0.9 -0.9 0.3 (squares 1.8)
    noisy = growth_fit([[1.0, 3.0, 2.0, 4.0]])
    assert noisy.slope == pytest.approx(0.8)
    spread = 5.0  # of the turns about their mean
    assert noisy.standard_error == pytest.approx((1.8 / (4 - 2) / spread) ** 0.5)
    assert growth_fit([[5.0]]).slope == 0.0


def test_growth_fit_gives_each_thread_its_own_intercept() -> None:
    """Threads offset from one another (one slower throughout) are not noise about the slope."""
    wobble = [0.5 * ((t * 11) % 5 - 2) for t in range(1, 201)]
    shifted = [
        [off + 0.05 * t + w for t, w in zip(range(1, 201), wobble, strict=True)]
        for off in (-20.0, 0.0, 20.0)
    ]
    alone = growth_fit([shifted[1]])
    pooled = growth_fit(shifted)
    assert pooled.slope == pytest.approx(alone.slope)
    assert pooled.standard_error < alone.standard_error  # three threads, not 40 ms of spread


def test_the_paired_difference_cancels_what_both_servers_saw() -> None:
    """A machine slowing down on some turns lands on both servers, measured back to back: the
    separate slopes are far off, the paired difference is exact."""
    drift = [40.0 * ((t * 7919) % 13 == 0) + 0.2 * t for t in range(1, 201)]
    base = [[20.0 + 0.4 * t + d for t, d in zip(range(1, 201), drift, strict=True)]]
    steeper = [[25.0 + 0.45 * t + d for t, d in zip(range(1, 201), drift, strict=True)]]
    paired = paired_growth(steeper, base)
    assert paired is not None
    assert paired.slope == pytest.approx(0.05)
    assert paired.standard_error == pytest.approx(0.0, abs=1e-9)
    assert growth_fit(base).standard_error > 0.01
    assert paired_growth([[1.0, 2.0]], [[1.0]]) is None


def _growing_column(label: str, series: list[list[float]]) -> ColumnResult:
    column = _column(label, 10.0, growth_fit(series).slope)
    column.turn_latencies = series
    return column


def test_growth_fails_only_when_measurably_steeper_than_langgraph() -> None:
    turns = range(1, 201)
    noise = [3.0 * ((t * 37) % 7 - 3) for t in turns]  # the same on both: cancels
    jitter = [0.5 * ((t * 11) % 5 - 2) for t in turns]  # foldwise's own: does not
    base = [[20.0 + 0.4 * t + n for t, n in zip(turns, noise, strict=True)]]

    def judged(slope: float, spread: float = 1.0) -> tuple[str, bool | None]:
        series = [
            [
                20.0 + slope * t + n + spread * j
                for t, n, j in zip(turns, noise, jitter, strict=True)
            ]
        ]
        report = GatewayBenchReport(
            [_growing_column(FAST, base), _growing_column(SQLITE, series)], sizes={}
        )
        found = [(v, ok) for name, v, ok in checks(report) if "growth" in name]
        assert len(found) == 1
        return found[0]

    assert judged(0.4)[1] is True  # the same slope
    assert judged(0.38)[1] is True
    value, ok = judged(0.44)  # 10 % steeper: far beyond the error of the difference
    assert ok is False
    assert value.startswith("+0.040 ± 0.00")
    # foldwise's own noise 40 times larger: the same slope cannot be told apart from a 10 %
    # steeper one, so it is not a pass (n/a), and a far steeper one still fails
    assert judged(0.4, spread=40.0)[1] is None
    assert judged(0.6, spread=40.0)[1] is False


def test_errors_under_load_fail_the_check() -> None:
    """Requests/s counts only answered requests: errors must show as a failed target."""
    column = _column(SQLITE, 10.0, 0.1)
    column.concurrent_requests, column.concurrent_errors = 2700, 300
    report = GatewayBenchReport([column], sizes={"clients": 16, "seconds": 30})
    verdicts = {name: (value, ok) for name, value, ok in checks(report)}
    assert verdicts[f"{SQLITE}: ≥ 80 requests/s"][1] is True  # 100/s answered
    assert verdicts[f"{SQLITE}: no errors under load"] == ("300 of 3000 requests", False)
    assert not report.passed
    column.concurrent_errors = 0
    assert report.passed
