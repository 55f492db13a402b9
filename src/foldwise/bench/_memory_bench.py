"""`foldwise bench memory`: long-term memory measured end to end, with the issue's targets.

Six checks (`_memory_checks`), each on its own SQLite file in a temporary folder: cross-thread
recall and isolation, supersession, quarantine, scope, CJK search (with plain FTS5 tables, the
peers' approach, measured on the same queries) and the write/injection cost per run.
"""

from __future__ import annotations

import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foldwise.bench._memory_checks import (
    CostResult,
    QuarantineResult,
    RecallResult,
    ScopeResult,
    SupersessionResult,
    check_quarantine,
    check_recall,
    check_scope,
    check_supersession,
    check_write_cost,
)
from foldwise.bench._memory_search_check import SearchResult, check_cjk_search

if TYPE_CHECKING:  # the kill test's child runs `-m foldwise.bench._memory_kill_child`: the
    # package must not import it first
    from foldwise.bench._memory_kill import MemoryKillReport
    from foldwise.bench._memory_pipeline import MemoryPipelineReport

__all__ = ["MemoryBenchReport", "run_memory_benchmark"]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


def _cost_row(step: str, p50: float, p95: float) -> str:
    return f"| {step} | {p50:.3f} ms | {p95:.3f} ms |"


def _ok(passed: bool) -> str:
    return "✅" if passed else "❌"


@dataclass
class MemoryBenchReport:
    """Every figure `foldwise bench memory` measured, and the machine it ran on."""

    quick: bool
    seconds: float
    recall: RecallResult
    supersession: SupersessionResult
    quarantine: QuarantineResult
    scope: ScopeResult
    search: SearchResult
    cost: CostResult
    pipeline: MemoryPipelineReport
    kill: MemoryKillReport

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "benchmark": "memory",
            "quick": self.quick,
            "seconds": round(self.seconds, 2),
            "python": platform.python_version(),
            "machine": platform.machine(),
            **{
                name: asdict(getattr(self, name))
                for name in (
                    "recall",
                    "supersession",
                    "quarantine",
                    "scope",
                    "search",
                    "cost",
                    "pipeline",
                    "kill",
                )
            },
        }

    def _rows(self) -> list[tuple[str, str, str, bool]]:
        return [*self._memory_rows(), *self._write_path_rows(), *self._pipeline_rows()]

    def _pipeline_rows(self) -> list[tuple[str, str, str, bool]]:
        p, k = self.pipeline, self.kill
        worst = max(p.enqueue_sync.p95_ms, p.enqueue_async.p95_ms)
        return [
            (
                "6 write path: enqueue on the answer's path, p95 (sync / async)",
                f"{p.enqueue_sync.p95_ms:.2f} / {p.enqueue_async.p95_ms:.2f} ms",
                "≤ 2 ms",
                worst <= 2.0,
            ),
            (
                f"7 kill test: updates applied after {k.points} SIGKILLs ({k.backend})",
                f"{k.applied}/{k.updates} ({k.applied_percent:.1f} %)",
                "100 %",
                k.applied == k.updates,
            ),
            (
                "7 kill test: duplicate facts / half-applied supersessions / from uncommitted "
                "compactions",
                f"{k.duplicates} / {k.half_applied} / {k.uncommitted_applied}",
                "0 / 0 / 0",
                k.duplicates == k.half_applied == k.uncommitted_applied == 0,
            ),
        ]

    def _memory_rows(self) -> list[tuple[str, str, str, bool]]:
        r, s = self.recall, self.supersession
        change = s.cases.get("change", 0)
        right = s.right
        return [
            (
                "1 recall: facts a fresh thread's query found (recall section or top 5)",
                f"{r.found}/{r.planted} ({_pct(r.found, r.planted)})",
                "≥ 98 %",
                r.found >= 0.98 * r.planted,
            ),
            (
                "1 recall: facts shared across agents found",
                f"{r.shared_found}/{r.shared_planted}",
                "all",
                r.shared_found == r.shared_planted,
            ),
            (
                "1 isolation: facts seen across users / across agents",
                f"{r.cross_user} / {r.cross_agent}",
                "0 / 0",
                r.cross_user == r.cross_agent == 0,
            ),
            (
                "2 supersession: current value after a change",
                f"{right.get('change', 0)}/{change}",
                "100 %",
                right.get("change", 0) == change,
            ),
            (
                "2 supersession: superseded values injected as current",
                str(s.stale_injected),
                "0",
                s.stale_injected == 0,
            ),
            (
                '2 supersession: correct "as of" answers',
                f"{s.as_of_right}/{s.as_of_cases}",
                "100 %",
                s.as_of_right == s.as_of_cases,
            ),
            (
                "2 supersession: additive facts closed",
                str(s.additive_closed),
                "0",
                s.additive_closed == 0,
            ),
            (
                "2 supersession: additive facts stored beside the first",
                f"{right.get('additive', 0)}/{s.cases.get('additive', 0)}",
                "100 %",
                right.get("additive", 0) == s.cases.get("additive", 0),
            ),
            (
                "2 supersession: retractions close the slot",
                f"{right.get('retract', 0)}/{s.cases.get('retract', 0)}",
                "100 %",
                right.get("retract", 0) == s.cases.get("retract", 0),
            ),
        ]

    def _write_path_rows(self) -> list[tuple[str, str, str, bool]]:
        q, p, c = self.quarantine, self.scope, self.search
        return [
            (
                "3 quarantine: attacks reaching active memory or the block",
                str(q.reached),
                "0",
                q.reached == 0,
            ),
            (
                "3 quarantine: attacks quarantined with a reason",
                f"{q.quarantined}/{q.attacks} ({_pct(q.quarantined, q.attacks)})",
                "≥ 95 %",
                q.quarantined >= 0.95 * q.attacks,
            ),
            (
                "3 quarantine: benign statements quarantined",
                f"{q.false_quarantine}/{q.benign} ({_pct(q.false_quarantine, q.benign)})",
                "≤ 2 %",
                q.false_quarantine <= 0.02 * q.benign,
            ),
            (
                "4 scope: task-scoped statements promoted",
                f"{p.task_promoted}/{p.task}",
                "0",
                p.task_promoted == 0,
            ),
            (
                "4 scope: durable statements stored",
                f"{p.durable_stored}/{p.durable} ({_pct(p.durable_stored, p.durable)})",
                "≥ 95 %",
                p.durable_stored >= 0.95 * p.durable,
            ),
            (
                f"5 CJK search: recall@5, {c.queries} queries of 1-4 chars over {c.facts:,} facts",
                f"{c.recall_at_5:.3f}",
                "≥ 0.95",
                c.recall_at_5 >= 0.95,
            ),
            (
                f"5 CJK search: p95 latency at {c.large_facts:,} facts",
                f"{c.large_p95_ms:.2f} ms",
                "≤ 20 ms",
                c.large_p95_ms <= 20,
            ),
        ]

    def _queue_lines(self) -> list[str]:
        p, k = self.pipeline, self.kill
        return [
            "### The write queue",
            "",
            "| Step | p50 | p95 |",
            "|---|---|---|",
            _cost_row(
                "enqueue (sync, on the answer's path)",
                p.enqueue_sync.p50_ms,
                p.enqueue_sync.p95_ms,
            ),
            _cost_row(
                "enqueue (async)",
                p.enqueue_async.p50_ms,
                p.enqueue_async.p95_ms,
            ),
            _cost_row(
                "answer to fact visible (worker woken)",
                p.end_to_end.p50_ms,
                p.end_to_end.p95_ms,
            ),
            _cost_row(
                "answer to fact visible (worker polling)",
                p.end_to_end_polling.p50_ms,
                p.end_to_end_polling.p95_ms,
            ),
            "",
            f"Worker throughput: {p.worker_slices_per_second:.0f} slices/s "
            f"(rules extractor, {p.backend}). Kill test: {k.points} "
            f"SIGKILLs at seeded points in {k.seconds:.1f} s, "
            f"{k.state_mismatches} namespaces differing from a crash-free run.",
            "",
        ]

    def to_markdown(self) -> str:
        """The report as Markdown tables."""
        c, cost, rows = self.search, self.cost, self._rows()
        lines = [
            f"## foldwise bench memory{' (quick)' if self.quick else ''}",
            "",
            f"Offline, deterministic corpora (EN + ZH), SQLite backend, rules extractor; "
            f"{self.seconds:.1f} s on {platform.machine()}, Python {platform.python_version()}.",
            "",
            "| Check | Measured | Target | |",
            "|---|---|---|---|",
            *(f"| {name} | {value} | {target} | {_ok(ok)} |" for name, value, target, ok in rows),
            "",
            f"{self.recall.in_block}/{self.recall.planted + self.recall.shared_planted} planted "
            "facts were anywhere in the injected memory (profile or recall); the recall row "
            "counts only what the query found.",
            "",
            f"### CJK search: recall@5 on the same {c.queries} queries",
            "",
            "Selective queries (each matches at most 5 facts) test matching; broad ones (up to "
            "20 matching facts) test ranking too.",
            "",
            "| Index | selective recall@5 | broad recall@5 |",
            "|---|---|---|",
            f"| foldwise (FTS5 over CJK unigrams + bigrams) | {c.recall_at_5:.3f} | "
            f"{c.ranked_recall_at_5:.3f} |",
            *(
                f"| {name} | {c.peers[name]:.3f} | {value:.3f} |"
                if name in c.peers
                else f"| {name} | | {value:.3f} |"
                for name, value in c.ranked_peers.items()
            ),
            "",
            f"Search latency at {c.facts:,} facts: p50 {c.p50_ms:.2f} ms, p95 {c.p95_ms:.2f} ms.",
            "",
            *self._queue_lines(),
            "### Cost per run when applied directly (`remember`)",
            "",
            "| Step | p50 | p95 |",
            "|---|---|---|",
            _cost_row(
                "`remember` (extract, screen, plan, SQLite write)",
                cost.remember_p50_ms,
                cost.remember_p95_ms,
            ),
            _cost_row("rules extraction alone", cost.extract_p50_ms, cost.extract_p95_ms),
            _cost_row(
                "injection (profile + recall for the run)", cost.inject_p50_ms, cost.inject_p95_ms
            ),
            "",
            f"{cost.runs} runs into one namespace ({cost.facts_at_end} active facts at the end).",
        ]
        return "\n".join(lines) + "\n"

    @property
    def passed(self) -> bool:
        """Whether every target held."""
        return all(ok for *_, ok in self._rows())


def run_memory_benchmark(*, quick: bool = False) -> MemoryBenchReport:
    """Run the checks (quick: fewer threads, a smaller search corpus, 20 kills)."""
    from foldwise.bench._memory_kill import run_memory_kill_benchmark
    from foldwise.bench._memory_pipeline import run_memory_pipeline_benchmark

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="foldwise-bench-memory-") as folder:
        root = Path(folder)
        recall = check_recall(root, threads=10 if quick else 50)
        supersession = check_supersession(root)
        quarantine = check_quarantine(root)
        scope = check_scope(root)
        search = check_cjk_search(root, large=2_000 if quick else 10_000)
        cost = check_write_cost(root, runs=50 if quick else 200)
        pipeline = run_memory_pipeline_benchmark(
            url=f"sqlite:///{root / 'pipeline.db'}",
            enqueues=200 if quick else 500,
            slices=100 if quick else 200,
            trials=10 if quick else 30,
        )
        kill = run_memory_kill_benchmark(20 if quick else 200, url=f"sqlite:///{root / 'kill.db'}")
    return MemoryBenchReport(
        quick=quick,
        seconds=time.perf_counter() - start,
        recall=recall,
        supersession=supersession,
        quarantine=quarantine,
        scope=scope,
        search=search,
        cost=cost,
        pipeline=pipeline,
        kill=kill,
    )
