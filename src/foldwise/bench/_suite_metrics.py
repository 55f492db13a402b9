"""Metrics of the T1 suite computed from replay reports: M2 thrash, M3 cost, M4, M5 facts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from foldwise.bench._suite_scenarios import FACT_CATEGORIES, PlantedFact
from foldwise.messages import message_text
from foldwise.replay import Analyzer, Finished, ReplayReport, RequestSnapshot
from foldwise.tokens import TokenCounter

__all__ = ["Pricing", "facts_analyzer", "output_tokens", "request_text", "system_metrics"]


@dataclass(frozen=True)
class Pricing:
    """Prices and speeds of the cost model (research/perf.md §5 M3, Anthropic-style caching).

    Attributes:
        input_per_mtok: $ per million uncached input tokens.
        output_per_mtok: $ per million output tokens.
        cache_read: Multiplier of a cached input token (0.1×).
        cache_write: Multiplier of an input token written to the cache (1.25×).
        prefill_tps: Uncached prefill speed of the modelled wall clock (tokens/s).
        cached_tps: Cached prefill speed (tokens/s).
        decode_tps: Output speed (tokens/s).
    """

    input_per_mtok: float = 3.0
    output_per_mtok: float = 15.0
    cache_read: float = 0.1
    cache_write: float = 1.25
    prefill_tps: float = 2_500.0
    cached_tps: float = 25_000.0
    decode_tps: float = 50.0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return asdict(self)


def output_tokens(messages: Sequence[BaseMessage], counter: TokenCounter) -> int:
    """Tokens the recorded assistant wrote (identical for every system)."""
    return sum(counter.count_message(m) for m in messages if isinstance(m, AIMessage))


def _gaps(calls: Sequence[int]) -> list[int]:
    return [b - a for a, b in pairwise(calls)]


def system_metrics(report: ReplayReport, *, answer_tokens: int, pricing: Pricing) -> dict[str, Any]:
    """Every suite metric of one (scenario, system) replay."""
    calls = report.real_calls
    compaction_calls = [e.call for e in report.compactions]
    gaps = _gaps(compaction_calls)
    uncached = sum(c.measured - c.cached_tokens for c in calls)
    cached = report.cached_tokens
    input_cost = (
        (cached * pricing.cache_read + uncached * pricing.cache_write)
        * pricing.input_per_mtok
        / 1e6
    )
    tax = (
        report.summary_input_tokens * pricing.input_per_mtok
        + report.summary_output_tokens * pricing.output_per_mtok
    ) / 1e6
    output_cost = answer_tokens * pricing.output_per_mtok / 1e6
    seconds = (
        uncached / pricing.prefill_tps
        + cached / pricing.cached_tps
        + answer_tokens / pricing.decode_tps
        + report.summary_input_tokens / pricing.prefill_tps
        + report.summary_output_tokens / pricing.decode_tps
    )
    out: dict[str, Any] = {
        "calls": len(calls),
        "overflow_rejections": report.rejections,
        "failed_calls": report.failures,
        "compactions": report.compaction_count,
        "compactions_per_100_calls": round(100 * report.compaction_count / max(1, len(calls)), 2),
        "min_calls_between_compactions": min(gaps) if gaps else None,
        "thrash_compactions": sum(1 for g in gaps if g <= 2),
        "total_prompt_tokens": report.total_tokens,
        "peak_prompt_tokens": report.peak_tokens,
        "cached_prompt_tokens": cached,
        "summary_input_tokens": report.summary_input_tokens,
        "summary_output_tokens": report.summary_output_tokens,
        "cost_usd": round(input_cost + tax + output_cost, 4),
        "summary_tax_usd": round(tax, 4),
        "modelled_seconds": round(seconds, 1),
        "human_verbatim": round(report.human_verbatim, 4),
        "human_verbatim_or_recoverable": round(report.human_kept, 4),
        "orphan_tool_messages": report.orphans,
        "offloaded_bytes": report.offloaded_bytes,
        "error": report.error,
    }
    if "facts" in report.extras:
        out["facts"] = _fact_summary(report.extras["facts"])
    return out


def _fact_summary(planted: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Retention over current facts (superseded plans are reported apart)."""
    facts = [f for f in planted if not f["superseded"]]
    old = [f for f in planted if f["superseded"]]
    by_category: dict[str, dict[str, float]] = {}
    for category in FACT_CATEGORIES:
        items = [f for f in facts if f["category"] == category]
        if not items:
            continue
        present = sum(f["present"] for f in items)
        kept = sum(f["present"] or f["recoverable"] for f in items)
        by_category[category] = {
            "present": round(present / len(items), 4),
            "present_or_recoverable": round(kept / len(items), 4),
        }
    total = len(facts) or 1
    return {
        "present": round(sum(f["present"] for f in facts) / total, 4),
        "present_or_recoverable": round(
            sum(f["present"] or f["recoverable"] for f in facts) / total, 4
        ),
        "by_category": by_category,
        "lost": [f["key"] for f in facts if not (f["present"] or f["recoverable"])],
        "superseded_present": round(sum(f["present"] for f in old) / len(old), 4) if old else None,
    }


def request_text(snapshot: RequestSnapshot) -> str:
    """Everything a request shows the model: system prompt, messages, tool-call arguments."""
    parts = [message_text(snapshot.system)] if snapshot.system is not None else []
    for message in snapshot.messages:
        parts.append(message_text(message))
        if isinstance(message, AIMessage) and message.tool_calls:
            parts.append(json.dumps([c["args"] for c in message.tool_calls], ensure_ascii=False))
    return "\n".join(parts)


def facts_analyzer(facts: Sequence[PlantedFact]) -> Analyzer:
    """An analyzer checking each planted fact in the last request (and the system's store)."""

    def analyze(done: Finished) -> dict[str, Any]:
        accepted = [
            s for s, a in zip(done.snapshots, done.attempts, strict=False) if not a.rejected
        ]
        text = request_text(accepted[-1]) if accepted else ""
        stored: list[str] | None = None
        rows: list[dict[str, Any]] = []
        for fact in facts:
            present = fact.key in text
            recoverable = False
            if not present:
                if stored is None:
                    stored = done.system.stored_texts(done.final_state, done.ctx)
                recoverable = any(fact.key in t for t in stored)
            rows.append({**asdict(fact), "present": present, "recoverable": recoverable})
        return {"facts": rows}

    return analyze
