"""Benchmark: per-call compaction decision cost, foldwise vs LangChain's middleware."""

from __future__ import annotations

import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["DecisionBenchResult", "run_decision_benchmark"]


def _pair(i: int) -> list[BaseMessage]:
    body = (
        f"result {i}: "
        + "The service returned rows for the requested window. " * 20
        + f'{{"id": {i}, "status": "ok", "items": [1, 2, 3]}}'
    )
    return [
        AIMessage(
            "",
            tool_calls=[{"name": "search", "args": {"q": f"query {i}"}, "id": f"call{i}"}],
            id=f"ai{i}",
        ),
        ToolMessage(body, tool_call_id=f"call{i}", name="search", id=f"tool{i}"),
    ]


def _history(n: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Research the incident timeline.", id="h0")]
    i = 0
    while len(messages) < n:
        messages.extend(_pair(i))
        i += 1
    return messages[:n]


@dataclass
class DecisionBenchResult:
    """Per-call decision cost on a growing run, for both middlewares."""

    calls: int
    start_messages: int
    end_messages: int
    foldwise_ms: list[float] = field(default_factory=list)
    langchain_ms: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Foldwise total time / LangChain total time."""
        return sum(self.foldwise_ms) / max(1e-9, sum(self.langchain_ms))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "benchmark": "decision_cost",
            "calls": self.calls,
            "messages": [self.start_messages, self.end_messages],
            "foldwise_total_ms": round(sum(self.foldwise_ms), 2),
            "langchain_total_ms": round(sum(self.langchain_ms), 2),
            "foldwise_median_ms": round(statistics.median(self.foldwise_ms), 4),
            "langchain_median_ms": round(statistics.median(self.langchain_ms), 4),
            "ratio_foldwise_over_langchain": round(self.ratio, 4),
            "python": platform.python_version(),
        }

    def to_markdown(self) -> str:
        """A small Markdown table."""
        d = self.to_dict()
        return "\n".join(
            [
                f"Decision cost over {d['calls']} calls ({d['messages'][0]} -> {d['messages'][1]} "
                "messages, no compaction firing):",
                "",
                "| middleware | total ms | median ms/call |",
                "|---|---:|---:|",
                f"| foldwise | {d['foldwise_total_ms']} | {d['foldwise_median_ms']} |",
                f"| LangChain SummarizationMiddleware | {d['langchain_total_ms']} | "
                f"{d['langchain_median_ms']} |",
                "",
                f"ratio foldwise / LangChain: **{d['ratio_foldwise_over_langchain']}**",
            ]
        )


def run_decision_benchmark(*, calls: int = 1000, start: int = 200) -> DecisionBenchResult:
    """Time `before_model` of both middlewares on the same growing history.

    Triggers are set so neither compacts: this measures the decision every model call pays.
    """
    from langchain.agents.middleware import SummarizationMiddleware as LangChainSummarization
    from langgraph.runtime import Runtime

    from foldwise.config import parse_config
    from foldwise.middleware import SummarizationMiddleware
    from foldwise.testing import ScriptedChatModel

    model = ScriptedChatModel(default="summary")
    ours = SummarizationMiddleware(
        config=parse_config({"summarization": {"trigger": {"type": "tokens", "value": 10**9}}}),
        model=model,
    )
    theirs = LangChainSummarization(model=model, trigger=("tokens", 10**9))
    runtime: Runtime[Any] = Runtime(context=None)
    messages = _history(start)
    result = DecisionBenchResult(calls=calls, start_messages=start, end_messages=start + 2 * calls)
    next_pair = len(messages)
    for _ in range(calls):
        messages = [*messages, *_pair(next_pair)]
        next_pair += 1
        state: Any = {"messages": messages}
        t0 = time.perf_counter()
        ours.before_model(state, runtime)
        t1 = time.perf_counter()
        theirs.before_model(state, runtime)
        t2 = time.perf_counter()
        result.foldwise_ms.append((t1 - t0) * 1000)
        result.langchain_ms.append((t2 - t1) * 1000)
    return result
