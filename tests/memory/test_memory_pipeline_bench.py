"""The memory write-queue figures run and report what they measured (no timing asserted)."""

from __future__ import annotations

from foldwise.bench._memory_pipeline import run_memory_pipeline_benchmark


def test_pipeline_figures_are_measured() -> None:
    report = run_memory_pipeline_benchmark(enqueues=20, slices=10, trials=3, poll_seconds=0.02)
    figures = report.as_dict()
    assert figures["backend"] == "sqlite"
    assert figures["enqueue_sync"]["n"] == figures["enqueue_async"]["n"] == 20
    assert figures["end_to_end"]["n"] == figures["end_to_end_polling"]["n"] == 3
    for name in ("enqueue_sync", "enqueue_async", "end_to_end", "end_to_end_polling"):
        row = figures[name]
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["max_ms"]
    assert report.worker_slices_per_second > 0
