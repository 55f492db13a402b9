"""Benchmarks: token counting, the replay suite (M1–M5) and the offload A/B runs.

`run_token_benchmark` measures token-count accuracy and counting cost; `run_bench_suite`
replays the scenarios through foldwise and its peers; `run_offload_ab` and
`run_offload_benchmark` measure the offload tier alone; `run_memory_benchmark` measures
long-term memory end to end; `run_presummary_benchmark` measures the compacting turn with and
without background pre-summarization.
"""

from foldwise.bench._memory_bench import MemoryBenchReport, run_memory_benchmark
from foldwise.bench._offload_ab import OffloadABResult, run_offload_ab
from foldwise.bench._offload_session import run_offload_benchmark
from foldwise.bench._presummary import PresummaryBenchReport, run_presummary_benchmark
from foldwise.bench._reliability import ReliabilityReport, run_reliability, write_report
from foldwise.bench._suite import BenchSuiteResult, run_bench_suite
from foldwise.bench._tokens import AccuracyRow, SpeedRow, TokenBenchResult, run_token_benchmark

__all__ = [
    "AccuracyRow",
    "BenchSuiteResult",
    "MemoryBenchReport",
    "OffloadABResult",
    "PresummaryBenchReport",
    "ReliabilityReport",
    "SpeedRow",
    "TokenBenchResult",
    "run_bench_suite",
    "run_memory_benchmark",
    "run_offload_ab",
    "run_offload_benchmark",
    "run_presummary_benchmark",
    "run_reliability",
    "run_token_benchmark",
    "write_report",
]
