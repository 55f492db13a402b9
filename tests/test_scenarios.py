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


def _store_texts(root: Any) -> list[str]:
    from pathlib import Path

    return [p.read_text(encoding="utf-8") for p in Path(root).rglob("*.txt")]


def test_oversized_paste_is_stored_before_the_compaction_decision(tmp_path: Any) -> None:
    paste = "".join(f"row {i}: value {i * 7} checksum {i * 13 % 97}\n" for i in range(20000))
    model = ScriptedChatModel(default="noted")
    config = parse_config(
        {
            "summarization": {"trigger": {"type": "tokens", "value": 60000}},
            "offload": {"root": str(tmp_path / "artifacts"), "human_token_limit": 20000},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(paste)]}, THREAD)
    state = agent.get_state(THREAD).values
    assert not state.get("compactions"), "a stored paste must not force a compaction"
    [ref] = state["offloads"]
    request = model.requests[-1].messages
    assert not any(paste in str(m.content) for m in request)
    assert any(ref["artifact_id"] in str(m.content) for m in request)
    assert paste in _store_texts(tmp_path / "artifacts")


def test_user_input_over_the_preservation_budget_is_stored_not_paraphrased(tmp_path: Any) -> None:
    specs = [
        f"Spec {n}: " + f"requirement {n} must hold for every tenant. " * 400 for n in range(3)
    ]
    model = ScriptedChatModel(default="ack")
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "preserve_human": {"mode": "all", "max_tokens": 9000},
                "min_gain_tokens": 0,
            },
            "offload": {"root": str(tmp_path / "artifacts")},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    for spec in specs:
        agent.invoke({"messages": [HumanMessage(spec)]}, THREAD)
    agent.invoke({"messages": [HumanMessage("now implement it")]}, THREAD)
    state = agent.get_state(THREAD).values
    receipt = state["compactions"][-1]
    assert receipt["offloaded_ids"]
    stored = _store_texts(tmp_path / "artifacts")
    request = "\n".join(str(m.content) for m in model.requests[-1].messages)
    for spec in specs:
        assert spec in request or spec in stored, "user input must be verbatim or recoverable"
    assert {r["artifact_id"] for r in state["offloads"]} >= set(receipt["offloaded_ids"])


def test_compacted_span_is_archived_verbatim_and_searchable(tmp_path: Any) -> None:
    from foldwise.offload import FilesystemArtifactStore

    model = ScriptedChatModel(default="ok " * 50)
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "model_name": "extractive",
            },
            "offload": {"root": str(tmp_path / "artifacts")},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("note: the vault code is ZX-4471")]}, THREAD)
    model.default = "The vault code ZX-4471 unlocks the archive room. " + "ok " * 50
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"step {i}")]}, THREAD)
    state = agent.get_state(THREAD).values
    receipt = state["compactions"][0]
    assert receipt["archive_id"]
    assert any(o["artifact_id"] == receipt["archive_id"] for o in state["offloads"])
    store = FilesystemArtifactStore(str(tmp_path / "artifacts"))
    found = store.search("scenario", receipt["archive_id"], "unlocks the archive room")
    assert found.matches, "an assistant turn removed by compaction is searchable verbatim"
    last = "\n".join(str(m.content) for m in model.requests[-1].messages)
    assert receipt["archive_id"] in last  # the model is told the archive exists


def test_archive_failure_does_not_block_compaction(tmp_path: Any) -> None:
    model = ScriptedChatModel(default="ok " * 50)
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
            },
            "offload": {"root": str(tmp_path / "artifacts")},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    middleware = foldwise.agent.find_summarization(agent)
    assert middleware is not None and middleware.offload is not None

    class BrokenStore:
        def put(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

    middleware.offload.store = BrokenStore()  # type: ignore[assignment]
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"step {i}")]}, THREAD)
    receipt = agent.get_state(THREAD).values["compactions"][0]
    assert receipt["archive_id"] is None
