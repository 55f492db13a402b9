"""Replay's per-call numbers equal what the middleware computes in a live `create_agent` run."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.agent import find_summarization
from foldwise.compaction import CompactionReceipt
from foldwise.config import parse_config
from foldwise.replay import Trace, replay_trace
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import get_counter

SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
PROSE = "The ledger service rejected the batch because the settlement window had closed. "
ZH = "结算窗口关闭后，账本服务拒绝了这一批交易，需要人工复核。"


def session(turns: int = 9) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are an operations analyst.")]
    for t in range(turns):
        messages.append(
            HumanMessage(f"第 {t} 轮：请核对批次 B-{t:03d} 的结算记录。Keep answers short.")
        )
        messages.append(
            AIMessage(
                "Checking both sources in parallel.",
                tool_calls=[
                    {"name": "search_docs", "args": {"query": f"batch B-{t:03d}"}, "id": f"s{t}"},
                    {"name": "search_logs", "args": {"query": f"B-{t:03d} errors"}, "id": f"l{t}"},
                ],
            )
        )
        size = 260 if t % 3 else 900
        messages.append(ToolMessage(PROSE * size, tool_call_id=f"s{t}", name="search_docs"))
        messages.append(ToolMessage(ZH * (size // 4), tool_call_id=f"l{t}", name="search_logs"))
        messages.append(AIMessage(f"Batch B-{t:03d}: the settlement window had closed."))
    return messages


def config() -> foldwise.FoldwiseConfig:
    return parse_config(
        {
            "models": [{"name": "run", "context_window": 60000}],
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "tokens", "value": 20000},
                "keep": {"type": "messages", "value": 6},
            },
            "offload": {"enabled": False},
        }
    )


class LiveTool(BaseTool):
    """A tool answering from recorded results (what the live application would return)."""

    results: dict[str, str] = {}

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return ToolMessage(self.results[input["id"]], tool_call_id=input["id"], name=self.name)


def live_run(messages: list[BaseMessage], cfg: foldwise.FoldwiseConfig) -> dict[str, Any]:
    results = {m.tool_call_id: m.text for m in messages if isinstance(m, ToolMessage)}
    tools = [
        LiveTool(
            name=name,
            description=f"Recorded tool {name} (replayed from a trace).",
            args_schema=SCHEMA,
            results=results,
        )
        for name in ("search_docs", "search_logs")
    ]
    provider = get_counter("o200k_base")
    tool_tokens = provider.count_tools(tools)

    def provider_count(request: list[BaseMessage]) -> int:
        return sum(provider.count_message(m) for m in request) + tool_tokens

    script = [m.model_copy(deep=True) for m in messages if isinstance(m, AIMessage)]
    model = ScriptedChatModel(
        responses=script,
        usage=True,
        input_token_counter=provider_count,
        profile={"max_input_tokens": 60000},
    )
    agent = foldwise.create_agent(
        cfg,
        model=model,
        tools=tools,
        checkpointer=InMemorySaver(),
        system_prompt=messages[0].text,
    )
    points: list[tuple[int, str, int, int, int, int]] = []

    def observe(receipt: CompactionReceipt) -> None:
        points.append(
            (
                len(model.requests),
                receipt.trigger,
                receipt.tokens_before,
                receipt.tokens_after,
                receipt.messages_removed,
                receipt.messages_preserved,
            )
        )

    summarization = find_summarization(agent)
    assert summarization is not None
    summarization.compactor.observers.append(observe)  # type: ignore[attr-defined]
    thread = {"configurable": {"thread_id": "live"}}
    for message in messages[1:]:
        if isinstance(message, HumanMessage):
            agent.invoke({"messages": [message.model_copy(deep=True)]}, thread)
    return {"model": model, "points": points, "tool_tokens": tool_tokens}


def test_replay_equals_a_live_create_agent_run() -> None:
    messages = session()
    cfg = config()
    tools_schema = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": f"Recorded tool {n} (replayed from a trace).",
                "parameters": SCHEMA,
            },
        }
        for n in ("search_docs", "search_logs")
    ]
    report = replay_trace(Trace.from_messages(messages, tools=tools_schema), config=cfg)
    live = live_run(messages, cfg)
    model: ScriptedChatModel = live["model"]
    counter = get_counter(None, config=cfg)

    assert report.error is None and report.rejections == 0
    assert len(report.calls) == len(model.requests) == 18
    for call, request in zip(report.calls, model.requests, strict=True):
        live_tokens = sum(counter.count_message(m) for m in request.messages)
        live_tokens += counter.count_tools(request.tools)
        assert call.tokens == live_tokens
        assert call.messages + 1 == len(request.messages)  # the live list includes the system
    provider = get_counter("o200k_base")
    usage = [
        sum(provider.count_message(m) for m in r.messages) + live["tool_tokens"]
        for r in model.requests
    ]
    assert [c.provider_tokens for c in report.calls] == usage
    replayed = [
        (
            e.call,
            e.trigger,
            e.tokens_before,
            e.tokens_after,
            e.messages_removed,
            e.messages_preserved,
        )
        for e in report.compactions
    ]
    assert replayed == live["points"]
    assert len(replayed) >= 2  # the scenario does compact
