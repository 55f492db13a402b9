"""Benchmarks: `run_token_benchmark` measures token-count accuracy and counting cost."""

from foldwise.bench._tokens import AccuracyRow, SpeedRow, TokenBenchResult, run_token_benchmark

__all__ = ["AccuracyRow", "SpeedRow", "TokenBenchResult", "run_token_benchmark"]
