"""Offload benchmark: a scripted "timeline over a big corpus" run, with offload off and on.

Seed 001's failure: a small question over a big corpus, where every retrieval returned tens of
thousands of characters and compaction could not keep up. This replays that shape offline: a
`ScriptedChatModel` calls a `search_corpus` tool `searches` times (each result about 47,000
characters of generated timeline records), then answers. The same script runs through
`langchain.agents.create_agent` twice, without and with `ToolOutputOffloadMiddleware`; no
summarization middleware runs in either, so the figures are what each request would carry.

Every request the model received is counted with `foldwise.tokens` (messages plus tool
schemas). A request above `trigger_tokens` is one a summarizer with that trigger would have had
to compact, so their number stands in for compactions.
"""

from __future__ import annotations

import random
import tempfile
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from foldwise.middleware import ToolOutputOffloadMiddleware
from foldwise.offload import FilesystemArtifactStore
from foldwise.replay import ScriptedChatModel
from foldwise.tokens import TokenCounter, get_counter

__all__ = ["make_corpus_page", "run_offload_benchmark"]

_PLACES = ("Lisbon", "Osaka", "Nairobi", "Quito", "Tallinn", "Perth", "Accra", "Oslo")
_ACTORS = ("the board", "the mayor", "a supplier", "the union", "an auditor", "the press")
_EVENTS = (
    "approved the budget for",
    "postponed the review of",
    "published a report on",
    "signed a contract about",
    "raised concerns over",
    "opened an inquiry into",
)
_TOPICS = ("the harbour", "rail freight", "water supply", "the archive", "school meals", "permits")


def make_corpus_page(query: str, *, chars: int = 47_000, seed: int = 0) -> str:
    """Deterministic retrieval output for `query`: dated timeline records, about `chars` long."""
    rng = random.Random(f"{seed}:{query}")
    lines = [f"# search_corpus results for {query!r}"]
    size = len(lines[0])
    index = 0
    while size < chars:
        year, month, day = rng.randint(1990, 2025), rng.randint(1, 12), rng.randint(1, 28)
        line = (
            f"[{index:04d}] {year}-{month:02d}-{day:02d} {rng.choice(_PLACES)}: "
            f"{rng.choice(_ACTORS)} {rng.choice(_EVENTS)} {rng.choice(_TOPICS)} "
            f"(doc {rng.randrange(10**6):06d}, score {rng.random():.3f}). "
            + " ".join(rng.choice(_TOPICS).split()[-1] for _ in range(rng.randint(8, 24)))
        )
        lines.append(line)
        size += len(line) + 1
        index += 1
    return "\n".join(lines)[:chars]


def _script(searches: int) -> list[Any]:
    steps: list[Any] = [
        AIMessage(
            "",
            tool_calls=[
                {
                    "name": "search_corpus",
                    "args": {"query": f"timeline part {i + 1}"},
                    "id": f"s{i}",
                }
            ],
        )
        for i in range(searches)
    ]
    steps.append("Timeline assembled from the retrieved records.")
    return steps


def _corpus_tool(chars: int) -> BaseTool:
    def search_corpus(query: str) -> str:
        """Search the document corpus; returns matching records."""
        return make_corpus_page(query, chars=chars)

    return StructuredTool.from_function(search_corpus)


def _run(
    *, offload: bool, searches: int, chars: int, trigger: int, counter: TokenCounter
) -> dict[str, Any]:
    model = ScriptedChatModel(responses=_script(searches))
    with tempfile.TemporaryDirectory(prefix="foldwise-bench-") as root:
        middleware = []
        store = None
        if offload:
            store = FilesystemArtifactStore(root)
            middleware.append(ToolOutputOffloadMiddleware(store=store))
        agent = create_agent(model, tools=[_corpus_tool(chars)], middleware=middleware)
        started = time.perf_counter()
        out = agent.invoke(
            {"messages": [HumanMessage("Build a timeline of the harbour decisions.")]},
            {"configurable": {"thread_id": "bench"}, "recursion_limit": 4 * searches + 10},
        )
        seconds = time.perf_counter() - started
        artifacts = len(store.list("bench")) if store is not None else 0
    sizes = [
        counter.count_messages(r.messages, anchor=False) + counter.count_tools(r.tools)
        for r in model.requests
    ]
    return {
        "requests": len(sizes),
        "request_tokens": sizes,
        "peak_request_tokens": max(sizes),
        "total_prompt_tokens": sum(sizes),
        "requests_over_trigger": sum(1 for s in sizes if s > trigger),
        "artifacts": artifacts,
        "offloads_recorded": len(out.get("offloads") or []),
        "answered": bool(out["messages"][-1].text),
        "seconds": round(seconds, 3),
    }


def run_offload_benchmark(
    *,
    searches: int = 12,
    result_chars: int = 47_000,
    trigger_tokens: int = 48_000,
    tokenizer: str | None = None,
) -> dict[str, Any]:
    """Replay the scripted corpus run with offload off and on; return the measurements.

    Args:
        searches: Number of `search_corpus` calls before the answer.
        result_chars: Size of each retrieval result in characters.
        trigger_tokens: Compaction trigger used to count would-be compactions.
        tokenizer: Counter to measure with (`foldwise.tokens.get_counter` name); default the
            script-aware estimate.

    Returns:
        `{"scenario": ..., "off": ..., "on": ..., "peak_ratio": ..., "total_ratio": ...}`;
        `off` and `on` hold `requests`, `request_tokens` (each request),
        `peak_request_tokens`, `total_prompt_tokens`, `requests_over_trigger`, `artifacts`,
        `offloads_recorded`, `answered` and `seconds` (wall time, informational).
    """
    counter = get_counter(tokenizer)
    common = {"searches": searches, "chars": result_chars, "trigger": trigger_tokens}
    off = _run(offload=False, counter=counter, **common)
    on = _run(offload=True, counter=counter, **common)
    return {
        "scenario": {
            "searches": searches,
            "result_chars": result_chars,
            "trigger_tokens": trigger_tokens,
            "counter": counter.name,
        },
        "off": off,
        "on": on,
        "peak_ratio": round(on["peak_request_tokens"] / off["peak_request_tokens"], 4),
        "total_ratio": round(on["total_prompt_tokens"] / off["total_prompt_tokens"], 4),
    }
