"""End-to-end scenarios from the seeds: SourceLens's pasted proposal, a Chinese session."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.config import parse_config
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import get_counter

THREAD = {"configurable": {"thread_id": "scenario"}}


def _proposal() -> str:
    paragraph = (
        "Proposal section {n}: the ingestion service must keep raw documents for 30 days, "
        "index them nightly, and never drop a citation. Budget owner: Dana (ext. 4417). "
    )
    text = "".join(paragraph.format(n=i) for i in range(60))
    return text[:8305]


def _is_summarizer_call(messages: list[BaseMessage]) -> bool:
    return bool(messages) and "<new_messages>" in str(messages[0].content)


def _brain(retrievals: int, summary: str) -> Any:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        if _is_summarizer_call(messages):
            return AIMessage(summary)
        done = sum(isinstance(m, ToolMessage) for m in messages)
        calls = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
        if len(calls) + done < retrievals * 2 and len(calls) < retrievals:
            n = len(calls) + 1
            return AIMessage(
                "", tool_calls=[{"name": "retrieve", "args": {"query": f"q{n}"}, "id": f"r{n}"}]
            )
        return AIMessage("Review complete: the proposal meets the retention requirement.")

    return respond


def test_sourcelens_pasted_proposal_reaches_the_final_request_verbatim() -> None:
    proposal = _proposal()
    assert len(proposal) == 8305

    @tool
    def retrieve(query: str) -> str:
        """Retrieve documents for a query."""
        return f"[{query}] " + ("retrieved passage about data retention policies. " * 980)[:47000]

    counter = get_counter()
    model = ScriptedChatModel(default=_brain(6, "SUMMARY: reviewing the pasted proposal."))
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "tokens", "value": 48000},
                "keep": {"type": "tokens", "value": 16000},
                "fallback": None,
            },
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(
        config, model=model, tools=[retrieve], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage(f"Please review this proposal:\n{proposal}")]}, THREAD)
    state = agent.get_state(THREAD).values
    assert state["compactions"], "the retrieval results must push the run past the trigger"
    final = [r for r in model.requests if not _is_summarizer_call(r.messages)][-1]
    assert any(proposal in str(m.content) for m in final.messages)
    assert counter.count_messages(final.messages, anchor=False) < 48000 + 12000


CHINESE_TURN = (
    "请帮我分析这个模块的错误处理逻辑，并说明为什么在高并发场景下会出现连接泄漏。"
    "我们必须保留现有的接口，不要修改数据库表结构。"
)


def test_chinese_session_compacts_before_the_real_count_passes_115_percent() -> None:
    trigger = 6000
    exact = get_counter("o200k_base")

    @tool
    def read_source(path: str) -> str:
        """Read a source file."""
        body = "".join(
            f"第{i}行：连接池在释放连接之前检查事务状态，若超时则记录错误日志。\n"
            for i in range(60)
        )
        return json.dumps({"path": path, "内容": body}, ensure_ascii=False)

    def respond(messages: list[BaseMessage]) -> AIMessage:
        if _is_summarizer_call(messages):
            return AIMessage("摘要：用户要求分析连接泄漏，不得修改接口和表结构。")
        n = sum(isinstance(m, ToolMessage) for m in messages)
        if (n < 12 and not isinstance(messages[-1], ToolMessage)) or (
            isinstance(messages[-1], ToolMessage) and n % 3
        ):
            return AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "read_source",
                        "args": {"path": f"/src/pool_{len(messages)}.py"},
                        "id": f"call{len(messages)}",
                    }
                ],
            )
        return AIMessage("分析完成：连接在超时路径上没有归还到连接池。")

    model = ScriptedChatModel(default=respond)
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "tokens", "value": trigger},
                "keep": {"type": "tokens", "value": 2000},
                "fallback": None,
                "min_gain_tokens": 0,
            },
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(
        config, model=model, tools=[read_source], checkpointer=InMemorySaver()
    )
    for _ in range(4):
        agent.invoke({"messages": [HumanMessage(CHINESE_TURN)]}, {**THREAD, "recursion_limit": 200})
    assert agent.get_state(THREAD).values["compactions"]
    worst = max(
        exact.count_messages(r.messages, anchor=False)
        for r in model.requests
        if not _is_summarizer_call(r.messages)
    )
    assert worst <= 1.15 * trigger, f"a request reached {worst} real tokens"
