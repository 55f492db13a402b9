"""Trace loaders: OpenAI, Anthropic and LangChain formats, detection, and errors naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from foldwise.errors import TraceFormatError
from foldwise.replay import Trace, dump_trace, load_trace, parse_trace

BIG = "检索结果：" + "第三季度营收增长百分之十二，主要来自海外市场。" * 4000  # ~90k chars


def conversation() -> list[BaseMessage]:
    """Chinese content, parallel tool calls and an oversized tool output."""
    return [
        SystemMessage("你是一个研究助手。"),
        HumanMessage("请对照我们的文档核对这份提案，重点看容量规划。"),
        AIMessage(
            "我先并行检索两处文档。",
            tool_calls=[
                {"name": "search_docs", "args": {"query": "容量规划"}, "id": "call_a"},
                {"name": "read_file", "args": {"path": "docs/容量.md"}, "id": "call_b"},
            ],
        ),
        ToolMessage(BIG, tool_call_id="call_a", name="search_docs"),
        ToolMessage("# 容量\n峰值 QPS 为 12000。", tool_call_id="call_b", name="read_file"),
        AIMessage("核查完毕：第 8 节的 QPS 与文档不一致。"),
        HumanMessage("谢谢，再看第 4.3 节。"),
        AIMessage("第 4.3 节没有问题。"),
    ]


def assert_same_conversation(trace: Trace, *, system: bool = True) -> None:
    expected = conversation() if system else conversation()[1:]
    got = list(trace.messages)
    assert [type(m) for m in got] == [type(m) for m in expected]
    for a, b in zip(got, expected, strict=True):
        assert a.text == b.text
        if isinstance(b, AIMessage):
            assert [(c["name"], c["args"], c["id"]) for c in a.tool_calls] == [  # type: ignore[attr-defined]
                (c["name"], c["args"], c["id"]) for c in b.tool_calls
            ]
        if isinstance(b, ToolMessage):
            assert a.tool_call_id == b.tool_call_id  # type: ignore[attr-defined]
    assert all(m.id for m in got)
    assert len({m.id for m in got}) == len(got)
    assert trace.model_calls == 3


@pytest.mark.parametrize("fmt", ["openai", "openai-requests", "anthropic", "langchain"])
def test_round_trip_every_format(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(dump_trace(conversation(), fmt), "utf-8")  # type: ignore[arg-type]
    trace = load_trace(path)
    assert trace.format == fmt.split("-")[0]
    assert trace.name == "trace"
    assert_same_conversation(trace)
    assert trace.system_prompt == "你是一个研究助手。"


def test_openai_json_array_with_parallel_calls_and_big_output() -> None:
    data = [
        {"role": "system", "content": "你是一个研究助手。"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "请对照我们的文档核对这份提案，重点看容量规划。"}],
        },
        {
            "role": "assistant",
            "content": "我先并行检索两处文档。",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "search_docs", "arguments": '{"query": "容量规划"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "docs/容量.md"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": BIG},
        {"role": "tool", "tool_call_id": "call_b", "content": "# 容量\n峰值 QPS 为 12000。"},
        {"role": "assistant", "content": "核查完毕：第 8 节的 QPS 与文档不一致。"},
        {"role": "user", "content": "谢谢，再看第 4.3 节。"},
        {"role": "assistant", "content": "第 4.3 节没有问题。"},
    ]
    trace = parse_trace(json.dumps(data, ensure_ascii=False, indent=2))
    assert trace.format == "openai"
    assert_same_conversation(trace)
    assert len(trace.messages[3].text) > 80_000


def test_openai_request_lines_take_the_longest_request_and_its_tools() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search_docs",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            },
        }
    ]
    text = dump_trace(conversation(), "openai-requests", tools=tools)
    trace = parse_trace(text)
    assert trace.tools[0]["function"]["name"] == "search_docs"
    assert_same_conversation(trace)


def test_anthropic_blocks_thinking_dropped_with_a_warning() -> None:
    body = {
        "system": [{"type": "text", "text": "你是一个研究助手。"}],
        "tools": [
            {"name": "search_docs", "description": "搜索", "input_schema": {"type": "object"}}
        ],
        "messages": [
            {"role": "user", "content": "请对照我们的文档核对这份提案，重点看容量规划。"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "先检索", "signature": "x"},
                    {"type": "text", "text": "我先并行检索两处文档。"},
                    {
                        "type": "tool_use",
                        "id": "call_a",
                        "name": "search_docs",
                        "input": {"query": "容量规划"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_b",
                        "name": "read_file",
                        "input": {"path": "docs/容量.md"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_a",
                        "content": [{"type": "text", "text": BIG}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_b",
                        "content": "# 容量\n峰值 QPS 为 12000。",
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "核查完毕：第 8 节的 QPS 与文档不一致。"}],
            },
            {"role": "user", "content": "谢谢，再看第 4.3 节。"},
        ],
        "response": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "第 4.3 节没有问题。"}],
        },
    }
    trace = parse_trace(json.dumps(body, ensure_ascii=False))
    assert trace.format == "anthropic"
    assert_same_conversation(trace)
    assert trace.tools[0]["function"]["parameters"] == {"type": "object"}
    assert any("thinking" in w for w in trace.warnings)


def test_anthropic_tool_result_error_status() -> None:
    body = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
                {"type": "text", "text": "what happened?"},
            ],
        },
        {"role": "assistant", "content": "it failed"},
    ]
    trace = parse_trace(json.dumps(body))
    kinds = [type(m).__name__ for m in trace.messages]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    assert trace.messages[2].status == "error"  # type: ignore[attr-defined]


def test_langchain_jsonl_keeps_ids() -> None:
    messages = conversation()
    for i, m in enumerate(messages):
        m.id = f"m{i}"
    text = "\n".join(json.dumps(d, ensure_ascii=False) for d in messages_to_dict(messages))
    trace = parse_trace(text)
    assert trace.format == "langchain"
    assert [m.id for m in trace.messages] == [f"m{i}" for i in range(len(messages))]


def test_explicit_format_overrides_detection() -> None:
    data = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert parse_trace(json.dumps(data)).format == "openai"
    assert parse_trace(json.dumps(data), format="anthropic").format == "anthropic"
    with pytest.raises(TraceFormatError, match="unknown LangChain message type"):
        parse_trace(json.dumps(data), format="langchain")


def test_in_memory_messages_get_ids_and_copies() -> None:
    messages = conversation()
    trace = Trace.from_messages(messages)
    assert all(m.id for m in trace.messages)
    assert messages[0].id is None


# -- malformed input: the error names the line and the field ------------------------------


def error_of(text: str, **kwargs: object) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as info:
        parse_trace(text, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_invalid_json_line() -> None:
    text = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"\n'
    err = error_of(text)
    assert err.line == 2
    assert "line 2" in str(err) and "invalid JSON" in str(err)


def test_missing_role_names_line_and_field() -> None:
    text = '{"role": "user", "content": "hi"}\n{"content": "yo"}\n'
    err = error_of(text)
    assert (err.line, err.field) == (2, "role")
    assert "line 2, field 'role'" in str(err)


def test_unknown_role() -> None:
    err = error_of('{"role": "user", "content": "hi"}\n{"role": "robot", "content": "x"}\n')
    assert (err.line, err.field) == (2, "role")


def test_bad_tool_arguments_in_pretty_json_array() -> None:
    data = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
            ],
        },
    ]
    text = json.dumps(data, indent=2)
    err = error_of(text)
    assert err.field == "[1].tool_calls[0].function.arguments"
    assert err.line == text.splitlines().index("  {", 2) + 1


def test_tool_call_without_id() -> None:
    line = json.dumps(
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}
    )
    err = error_of('{"role": "user", "content": "hi"}\n' + line + "\n")
    assert (err.line, err.field) == (2, "tool_calls[0].id")


def test_tool_message_without_call_id() -> None:
    text = "\n".join(
        json.dumps(x)
        for x in [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "x"},
            {"role": "tool", "content": "r"},
        ]
    )
    err = error_of(text)
    assert (err.line, err.field) == (3, "tool_call_id")


def test_request_lines_name_the_message_inside_the_request() -> None:
    good = {
        "messages": [{"role": "user", "content": "a"}],
        "response": {"role": "assistant", "content": "b"},
    }
    bad = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": 5}]}
    err = error_of(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    assert (err.line, err.field) == (2, "messages[1].content")


def test_anthropic_tool_result_without_id() -> None:
    body = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "content": "r"}]},
        ],
    }
    text = json.dumps(body, indent=2)
    err = error_of(text)
    assert err.field == "messages[2].content[0].tool_use_id"
    assert err.line is not None and text.splitlines()[err.line - 1].strip() == "{"


def test_langchain_unknown_type() -> None:
    text = json.dumps(
        [{"type": "human", "data": {"content": "hi"}}, {"type": "bot", "data": {"content": "x"}}]
    )
    err = error_of(text)
    assert err.field == "[1].type"


def test_no_assistant_message() -> None:
    err = error_of('{"role": "user", "content": "hi"}\n')
    assert "no assistant message" in str(err)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", "utf-8")
    with pytest.raises(TraceFormatError, match="empty"):
        load_trace(path)


def test_unknown_format_argument() -> None:
    err = error_of("[]", format="gemini")
    assert err.field == "format"


def test_local_chat_models_keep_their_langchain_type_names() -> None:
    from foldwise.replay import ReplayChatModel
    from foldwise.summarizers import ExtractiveSummarizer
    from foldwise.testing import FailingChatModel, ScriptedChatModel, SlowChatModel

    names = [
        m._llm_type
        for m in (
            ScriptedChatModel(responses=[]),
            ReplayChatModel(),
            ExtractiveSummarizer(),
            FailingChatModel(),
            SlowChatModel(),
        )
    ]
    assert names == [
        "foldwise-scripted",
        "foldwise-replay",
        "foldwise-extractive",
        "foldwise-failing",
        "foldwise-slow",
    ]
