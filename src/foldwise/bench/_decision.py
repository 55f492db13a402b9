"""Benchmark: the whole per-model-call cost of foldwise's middleware vs LangChain's.

What a user pays on every model call is every hook the middleware stack runs around it:
`before_model` of each middleware, the `wrap_model_call` chain (with a handler that answers
at once) and `after_model`. Both stacks are timed that way, on the same growing history, in
the same process; neither compacts (triggers are out of reach), so this is the steady-state
overhead of deciding. The LangChain peer is `SummarizationMiddleware`, whose only per-call
hook is `before_model`. Then each stack is timed alone on histories of fixed sizes (1,000 and
10,000 messages, each growing by one exchange per call) to show how the cost grows with the
conversation.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["DecisionBenchResult", "per_call_cost", "run_decision_benchmark"]

_ANSWER = AIMessage("ok", id="answer")


def _pair(i: int, tag: str = "") -> list[BaseMessage]:
    body = (
        f"result {i}: "
        + "The service returned rows for the requested window. " * 20
        + f'{{"id": {i}, "status": "ok", "items": [1, 2, 3]}}'
    )
    return [
        AIMessage(
            "",
            tool_calls=[{"name": "search", "args": {"q": f"query {i}"}, "id": f"{tag}call{i}"}],
            id=f"{tag}ai{i}",
        ),
        ToolMessage(body, tool_call_id=f"{tag}call{i}", name="search", id=f"{tag}tool{i}"),
    ]


def _history(n: int, tag: str = "") -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Research the incident timeline.", id=f"{tag}h0")]
    i = 0
    while len(messages) < n:
        messages.extend(_pair(i, tag))
        i += 1
    return messages[:n]


def _overrides(middleware: AgentMiddleware[Any, Any, Any], hook: str) -> bool:
    return getattr(type(middleware), hook) is not getattr(AgentMiddleware, hook)


def per_call_cost(
    middlewares: Sequence[AgentMiddleware[Any, Any, Any]], model: BaseChatModel
) -> Callable[[dict[str, Any], Any], None]:
    """A function running one model call's worth of hooks of `middlewares` on a state."""
    before = [m.before_model for m in middlewares if _overrides(m, "before_model")]
    after = [m.after_model for m in middlewares if _overrides(m, "after_model")]
    wrappers = [m.wrap_model_call for m in middlewares if _overrides(m, "wrap_model_call")]

    def answer(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return ModelResponse(result=[_ANSWER])

    handler: Callable[[ModelRequest[Any]], Any] = answer
    for wrap in reversed(wrappers):
        handler = (lambda w, h: lambda request: w(request, h))(wrap, handler)

    def call(state: dict[str, Any], runtime: Any) -> None:
        for hook in before:
            hook(state, runtime)
        if wrappers:
            handler(
                ModelRequest(
                    model=model,
                    messages=state["messages"],
                    system_message=None,
                    tools=[],
                    state=state,  # type: ignore[arg-type]
                    runtime=runtime,
                )
            )
        for hook in after:
            hook(state, runtime)

    return call


@dataclass
class DecisionBenchResult:
    """Per-call cost on a growing run, for both stacks, plus foldwise at fixed sizes."""

    calls: int
    start_messages: int
    end_messages: int
    foldwise_ms: list[float] = field(default_factory=list)
    langchain_ms: list[float] = field(default_factory=list)
    foldwise_at: dict[int, float] = field(default_factory=dict)
    langchain_at: dict[int, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """Foldwise total time / LangChain total time."""
        return sum(self.foldwise_ms) / max(1e-9, sum(self.langchain_ms))

    @property
    def growth(self) -> float | None:
        """Foldwise per-call median at the largest fixed size / at the smallest."""
        if len(self.foldwise_at) < 2:
            return None
        sizes = sorted(self.foldwise_at)
        return self.foldwise_at[sizes[-1]] / max(1e-9, self.foldwise_at[sizes[0]])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "benchmark": "per_call_cost",
            "calls": self.calls,
            "messages": [self.start_messages, self.end_messages],
            "foldwise_total_ms": round(sum(self.foldwise_ms), 2),
            "langchain_total_ms": round(sum(self.langchain_ms), 2),
            "foldwise_median_ms": round(statistics.median(self.foldwise_ms), 4),
            "langchain_median_ms": round(statistics.median(self.langchain_ms), 4),
            "ratio_foldwise_over_langchain": round(self.ratio, 4),
            "foldwise_median_ms_at": {str(k): round(v, 4) for k, v in self.foldwise_at.items()},
            "langchain_median_ms_at": {str(k): round(v, 4) for k, v in self.langchain_at.items()},
            "foldwise_growth_largest_over_smallest": (
                round(self.growth, 3) if self.growth is not None else None
            ),
            "python": platform.python_version(),
        }

    def to_markdown(self) -> str:
        """A small Markdown table."""
        d = self.to_dict()
        lines = [
            f"Whole per-call cost over {d['calls']} calls ({d['messages'][0]} -> "
            f"{d['messages'][1]} messages, no compaction firing): every hook each stack runs "
            "around one model call.",
            "",
            "| middleware stack | total ms | median ms/call |",
            "|---|---:|---:|",
            f"| foldwise (durable, summarization, offload) | {d['foldwise_total_ms']} | "
            f"{d['foldwise_median_ms']} |",
            f"| LangChain SummarizationMiddleware | {d['langchain_total_ms']} | "
            f"{d['langchain_median_ms']} |",
            "",
            f"ratio foldwise / LangChain: **{d['ratio_foldwise_over_langchain']}**",
        ]
        if self.foldwise_at:
            lines += ["", "| messages | foldwise ms/call | LangChain ms/call |", "|---:|---:|---:|"]
            for size in sorted(self.foldwise_at):
                lines.append(
                    f"| {size:,} | {self.foldwise_at[size]:.4f} | "
                    f"{self.langchain_at.get(size, float('nan')):.4f} |"
                )
            lines += [
                "",
                "foldwise growth, largest / smallest: "
                f"**{d['foldwise_growth_largest_over_smallest']}**",
            ]
        return "\n".join(lines)


def _stacks() -> tuple[Callable[..., None], Callable[..., None]]:
    from langchain.agents.middleware import SummarizationMiddleware as LangChainSummarization

    from foldwise.agent import build_middlewares
    from foldwise.config import parse_config
    from foldwise.summarizers import ExtractiveSummarizer

    model = ExtractiveSummarizer()  # never called: the handler answers at once
    config = parse_config(
        {
            "summarization": {"trigger": {"type": "tokens", "value": 10**9}},
            "offload": {"root": ".foldwise/bench-artifacts"},
        }
    )
    ours = per_call_cost(build_middlewares(config, model=model), model)
    theirs = per_call_cost([LangChainSummarization(model=model, trigger=("tokens", 10**9))], model)
    return ours, theirs


def _thread_runtime(thread_id: str) -> Any:
    from langgraph.runtime import ExecutionInfo, Runtime

    info = ExecutionInfo(
        checkpoint_id="bench",
        checkpoint_ns="",
        task_id="bench",
        thread_id=thread_id,
        run_id=None,
        node_attempt=1,
        node_first_attempt_time=0.0,
    )
    return Runtime(context=None, execution_info=info)


def _median_at(call: Callable[..., None], size: int, repeats: int = 101) -> float:
    """Median per-call cost of one stack on a history of `size` messages.

    The history grows by one exchange per call; the first call (a cold count of the whole
    history) is left out. Each stack runs alone, so neither pays for the other's garbage.
    """
    tag = f"s{size}-"  # its own ids and thread, as another conversation would have
    history = _history(size, tag)
    runtime = _thread_runtime(f"bench-{size}")
    times: list[float] = []
    for i in range(repeats + 1):
        history = [*history, *_pair(size + i, tag)]
        state = {"messages": history}
        t0 = time.perf_counter()
        call(state, runtime)
        if i:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run_decision_benchmark(
    *, calls: int = 1000, start: int = 200, sizes: Sequence[int] = (1_000, 10_000)
) -> DecisionBenchResult:
    """Time one model call's hooks of both stacks on the same growing history.

    Triggers are set so neither compacts: this measures what every model call pays. Then
    foldwise and LangChain are timed at fixed history sizes to show how the cost grows.
    """
    from langgraph.runtime import Runtime

    ours, theirs = _stacks()
    runtime: Runtime[Any] = Runtime(context=None)
    messages = _history(start)
    result = DecisionBenchResult(calls=calls, start_messages=start, end_messages=start + 2 * calls)
    next_pair = len(messages)
    for _ in range(calls):
        messages = [*messages, *_pair(next_pair)]
        next_pair += 1
        state: dict[str, Any] = {"messages": messages}
        t0 = time.perf_counter()
        ours(state, runtime)
        t1 = time.perf_counter()
        theirs(state, runtime)
        t2 = time.perf_counter()
        result.foldwise_ms.append((t1 - t0) * 1000)
        result.langchain_ms.append((t2 - t1) * 1000)
    for size in sizes:
        # Fresh stacks per size: no history warms or cools another's caches.
        ours, theirs = _stacks()
        result.foldwise_at[size] = _median_at(ours, size)
        result.langchain_at[size] = _median_at(theirs, size, repeats=31)
    return result
