"""`replay_trace` and `compare_trace`: the entry points of `foldwise replay`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise.config import FoldwiseConfig
from foldwise.replay._driver import replay_system
from foldwise.replay._report import ReplayReport
from foldwise.replay._systems import DEFAULT_PEERS, get_system
from foldwise.replay._trace import Trace, TraceFormat, load_trace

__all__ = ["ReplayComparison", "TraceInput", "as_trace", "compare_trace", "replay_trace"]

TraceInput = str | Path | Trace | Sequence[BaseMessage]
"""A trace file path, a loaded `Trace`, or the messages themselves."""


def as_trace(trace: TraceInput, *, format: TraceFormat = "auto") -> Trace:
    """Load or wrap `trace`."""
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, str | Path):
        return load_trace(trace, format=format)
    return Trace.from_messages(list(trace))


def replay_trace(
    trace: TraceInput,
    *,
    config: FoldwiseConfig | None = None,
    exact: bool = False,
    format: TraceFormat = "auto",
    window: int | None = None,
    summarizer: str | None = "extractive",
) -> ReplayReport:
    """Replay a recorded session through foldwise and measure every model call.

    The session's messages are fed in order to a real `foldwise.create_agent(config, ...)`
    agent; its model plays the recorded assistant messages back (refusing requests above the
    window like a provider) and its tools return the recorded results. At every model call the
    request is recorded as the model received it.

    Args:
        trace: A trace file (OpenAI, Anthropic or LangChain format, JSON or JSONL), a `Trace`,
            or LangChain messages.
        config: foldwise's configuration (defaults when omitted).
        exact: Also count every request with the exact `o200k_base` tokenizer.
        format: The file's format, or `auto` to detect it.
        window: The provider's context window (default: the config's first model's, else
            128,000).
        summarizer: `summarization.model_name` during replay; `extractive` (default) keeps it
            offline and deterministic, `None` keeps the config's.

    Returns:
        The report.

    Raises:
        TraceFormatError: The trace cannot be read; names the line and field.
    """
    return replay_system(
        as_trace(trace, format=format),
        get_system("foldwise"),
        config=config,
        window=window,
        exact=exact,
        summarizer=summarizer,
    )


@dataclass
class ReplayComparison:
    """foldwise and its peers on the same trace.

    Attributes:
        trace: The trace's name.
        reports: foldwise's report first, then one per peer (unavailable peers included, with
            their note).
    """

    trace: str
    reports: list[ReplayReport] = field(default_factory=list)

    @property
    def foldwise(self) -> ReplayReport:
        """foldwise's report."""
        return next(r for r in self.reports if r.system == "foldwise")

    def report(self, system: str) -> ReplayReport | None:
        """The report of `system`, if it was replayed."""
        return next((r for r in self.reports if r.system == system), None)

    def ratios(self) -> dict[str, dict[str, float | None]]:
        """For each peer, foldwise's value divided by the peer's (below 1: foldwise uses less)."""
        base = self.foldwise
        out: dict[str, dict[str, float | None]] = {}
        for peer in self.reports:
            if peer is base or not peer.available:
                continue
            out[peer.system] = {
                "total_tokens": _ratio(base.total_tokens, peer.total_tokens),
                "peak_tokens": _ratio(base.peak_tokens, peer.peak_tokens),
                "compactions": _ratio(base.compaction_count, peer.compaction_count),
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every report and the ratios."""
        return {
            "trace": self.trace,
            "reports": [r.to_dict() for r in self.reports],
            "ratios_foldwise_over_peer": self.ratios(),
        }


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def compare_trace(
    trace: TraceInput,
    *,
    config: FoldwiseConfig | None = None,
    peers: Sequence[str] = DEFAULT_PEERS,
    exact: bool = False,
    format: TraceFormat = "auto",
    window: int | None = None,
) -> ReplayComparison:
    """Replay the same trace through foldwise and each peer (same model, tools, summarizer).

    Args:
        trace: As for `replay_trace`.
        config: foldwise's configuration; `langchain-matched` also reads its trigger.
        peers: Peer keys: `langchain`, `langchain-matched`, `deepagents`, `raw`.
        exact: Also count every request with `o200k_base`.
        format: The file's format, or `auto`.
        window: The provider's context window for every system.

    Raises:
        TraceFormatError: The trace cannot be read.
        ValueError: An unknown peer key.
    """
    loaded = as_trace(trace, format=format)
    systems = [get_system("foldwise"), *(get_system(p) for p in peers if p != "foldwise")]
    comparison = ReplayComparison(loaded.name)
    for system in systems:
        comparison.reports.append(
            replay_system(loaded, system, config=config, window=window, exact=exact)
        )
    return comparison
