"""Benchmark: the compacting turn's latency with and without background pre-summarization.

One thread is driven turn by turn through `foldwise.create_agent` (the full middleware stack,
async, an in-memory checkpointer): each turn a user message, one model call of a stated
latency, an answer. The summarizer is a configured model that takes `summarizer_seconds`
(2 s by default). Reported per scenario: p50/p95 of ordinary turns, p95 of the turns that
compacted, and their ratio, with pre-summarization off and on.

The assumption that makes it work: the time between the request passing `presummarize_at` of
the trigger and the trigger itself firing (turns in that window times their latency) is at
least the summarizer's latency. The `short window` scenario breaks it on purpose (faster
turns): the compacting turn then waits for the rest of the background summary.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from foldwise._local_model import DelayedChatModel

__all__ = [
    "BenchChatModel",
    "PresummaryBenchReport",
    "PresummaryScenario",
    "run_presummary_benchmark",
]

_MODEL_PATH = "foldwise.bench._presummary:BenchChatModel"


class BenchChatModel(DelayedChatModel):
    """A chat model that waits `delay_seconds` (on the loop) and answers `reply_words` words.

    As a summarizer it answers a short structured summary instead.
    """

    llm_type: ClassVar[str] = "foldwise-bench"
    delay_seconds: float = 0.5
    reply_words: int = 200
    summary_words: int = 120

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """Tools are accepted and never called: the benchmark's turns are plain answers."""
        return self

    def _reply(self, messages: list[BaseMessage]) -> BaseMessage:
        if messages and "<new_messages>" in str(messages[0].content):
            words = " ".join(f"fact{i}" for i in range(self.summary_words))
            return AIMessage(content=f"## Session intent\nbenchmark thread\n## Facts\n{words}")
        return AIMessage(content=" ".join(f"word{i % 97}" for i in range(self.reply_words)))


@dataclass(frozen=True)
class PresummaryScenario:
    """One thread's shape: model latencies, trigger, turns."""

    name: str
    main_seconds: float
    summarizer_seconds: float = 2.0
    trigger_tokens: int = 20_000
    share: float = 0.8
    keep_messages: int = 4
    turns: int = 100
    user_words: int = 20
    reply_words: int = 250


@dataclass
class _Run:
    """The turns of one scenario with pre-summarization off or on."""

    ordinary: list[float] = field(default_factory=list)
    compacting: list[float] = field(default_factory=list)
    precomputed: int = 0
    window_turns: list[int] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        p95_compacting = _p95(self.compacting)
        p95_ordinary = _p95(self.ordinary)
        return {
            "ordinary_turns": len(self.ordinary),
            "compactions": len(self.compacting),
            "precomputed": self.precomputed,
            "p50_ordinary_ms": round(1000 * statistics.median(self.ordinary), 1),
            "p95_ordinary_ms": round(1000 * p95_ordinary, 1),
            "p95_compacting_ms": round(1000 * p95_compacting, 1),
            "ratio": round(p95_compacting / p95_ordinary, 3) if p95_ordinary else None,
            "turns_from_share_to_trigger": (
                round(statistics.mean(self.window_turns), 1) if self.window_turns else None
            ),
        }


def _p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (the maximum below 20 values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _config(scenario: PresummaryScenario, share: float | None, root: str) -> Any:
    from foldwise.config import parse_config

    bench = {"use": _MODEL_PATH, "context_window": 128_000}
    return parse_config(
        {
            "models": [
                {**bench, "name": "main", "delay_seconds": scenario.main_seconds},
                {**bench, "name": "summarizer", "delay_seconds": scenario.summarizer_seconds},
            ],
            "summarization": {
                "model_name": "summarizer",
                "trigger": {"type": "tokens", "value": scenario.trigger_tokens},
                "keep": {"type": "messages", "value": scenario.keep_messages},
                "presummarize_at": share,
            },
            "offload": {"root": root},
        }
    )


async def _drive(scenario: PresummaryScenario, share: float | None) -> _Run:
    from langgraph.checkpoint.memory import InMemorySaver

    from foldwise.agent import create_agent, find_summarization

    run = _Run()
    with tempfile.TemporaryDirectory(prefix="foldwise-presummary-") as root:
        config = _config(scenario, share, root)
        main = BenchChatModel(delay_seconds=scenario.main_seconds, reply_words=scenario.reply_words)
        agent = create_agent(config, model=main, checkpointer=InMemorySaver())
        summarization = find_summarization(agent)
        thread = {"configurable": {"thread_id": f"bench-{scenario.name}-{share}"}}
        question = " ".join(f"ask{i % 89}" for i in range(scenario.user_words))
        receipts, started_at = 0, None
        for number in range(scenario.turns):
            began = time.perf_counter()
            await agent.ainvoke({"messages": [HumanMessage(f"{number}: {question}")]}, thread)
            elapsed = time.perf_counter() - began
            state = (await agent.aget_state(thread)).values
            compactions = state.get("compactions") or []
            store = summarization.compactor.presummaries if summarization else None
            if started_at is None and store is not None and len(store):
                started_at = number
            if len(compactions) > receipts:
                receipts = len(compactions)
                run.compacting.append(elapsed)
                run.precomputed += bool(compactions[-1].get("precomputed"))
                if started_at is not None:
                    run.window_turns.append(number - started_at)
                started_at = None
            elif number > 0:  # the first turn warms caches up
                run.ordinary.append(elapsed)
        if summarization is not None:
            await summarization.aclose()
    return run


@dataclass
class PresummaryBenchReport:
    """Rows per scenario: pre-summarization off and on."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready results."""
        return {
            "benchmark": "presummary",
            "rows": self.rows,
            "load_average": [round(x, 2) for x in self.load_average],
            "seconds": round(self.seconds, 1),
        }

    def to_markdown(self) -> str:
        """The table for docs/benchmarks.md."""
        lines = [
            "| scenario | main model | summarizer | share window (turns) | presummarize_at | "
            "compactions (precomputed) | p50 / p95 ordinary | p95 compacting | ratio |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            lines.append(
                f"| {r['scenario']} | {r['main_seconds'] * 1000:.0f} ms | "
                f"{r['summarizer_seconds']:g} s | {r['window_seconds_estimate']} | "
                f"{r['presummarize_at'] or 'off'} | {r['compactions']} ({r['precomputed']}) | "
                f"{r['p50_ordinary_ms']:.0f} / {r['p95_ordinary_ms']:.0f} ms | "
                f"{r['p95_compacting_ms']:.0f} ms | **{r['ratio']}** |"
            )
        load = ", ".join(f"{x:.2f}" for x in self.load_average)
        lines += ["", f"Load average at the end: {load}; {self.seconds:.0f} s in all."]
        return "\n".join(lines)


def _window(scenario: PresummaryScenario, run: _Run) -> str:
    """Turns between passing the share and the trigger, and their time at the main latency."""
    turns = run.row()["turns_from_share_to_trigger"]
    if turns is None:
        return "–"
    return f"{turns:g} ≈ {turns * scenario.main_seconds:.1f} s"


def default_scenarios(quick: bool) -> list[PresummaryScenario]:
    """The window holds (slow enough turns) and does not (fast turns), or a seconds-long run."""
    if quick:
        quick_run = PresummaryScenario(
            "quick", 0.05, summarizer_seconds=0.1, trigger_tokens=10_000, share=0.75, turns=30
        )
        return [quick_run]
    return [
        PresummaryScenario("window holds", 0.5),
        PresummaryScenario("short window", 0.1),
    ]


def run_presummary_benchmark(
    *, quick: bool = False, scenarios: list[PresummaryScenario] | None = None
) -> PresummaryBenchReport:
    """Drive each scenario twice (pre-summarization off, then on) and compare the turns."""
    report = PresummaryBenchReport()
    began = time.perf_counter()
    for scenario in scenarios or default_scenarios(quick):
        for share in (None, scenario.share):
            run = asyncio.run(_drive(scenario, share))
            report.rows.append(
                {
                    "scenario": scenario.name,
                    "main_seconds": scenario.main_seconds,
                    "summarizer_seconds": scenario.summarizer_seconds,
                    "trigger_tokens": scenario.trigger_tokens,
                    "presummarize_at": share,
                    "window_seconds_estimate": _window(scenario, run),
                    **run.row(),
                }
            )
    report.seconds = time.perf_counter() - began
    report.load_average = os.getloadavg()
    return report
