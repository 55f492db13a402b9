"""`ToolOutputOffloadMiddleware` and the read/search tools, alone and inside `create_agent`."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import ExecutionInfo, Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from foldwise.config import FoldwiseConfig, OffloadConfig
from foldwise.errors import StorageError
from foldwise.messages import OFFLOAD_FLAG
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware
from foldwise.offload import (
    CLIPPED_FLAG,
    NO_THREAD_ID,
    BaseArtifactStore,
    FilesystemArtifactStore,
    StoreArtifactStore,
    collect_garbage,
)
from foldwise.testing import ScriptedChatModel

ROW = re.compile(r"^\s*(\d+)([ +])\t(.*)$")
NEXT = re.compile(r'\[more: call read_offloaded\("(art_[0-9a-f]{24})", offset=(\d+)\)\]$')
ID = re.compile(r"art_[0-9a-f]{24}")


class FailingArtifactStore(FilesystemArtifactStore):
    """A store whose disk is full: every write fails (a fake, not a mock)."""

    def _write(self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]) -> None:
        raise StorageError("No space left on device")


def big_output(chars: int = 200_000, marker: str = "NEEDLE-7f3a") -> str:
    lines = []
    i = 0
    while sum(map(len, lines)) + len(lines) < chars - 200:
        lines.append(f"{i:06d} result title={i * 7919 % 1000} body " + "lorem ipsum " * (i % 9))
        i += 1
    lines.append(f"near the end: {marker}")
    text = "\n".join(lines)
    return text + "\n" + "z" * (chars - len(text) - 1)


def runtime_for(thread: str | None) -> ToolRuntime:
    configurable = {"thread_id": thread} if thread else {}
    return ToolRuntime(
        state={},
        context=None,
        config={"configurable": configurable},
        stream_writer=lambda _chunk: None,
        tool_call_id="call-1",
        store=None,
    )


def call(name: str, thread: str | None = "t1", call_id: str = "call-1") -> ToolCallRequest:
    return ToolCallRequest(
        tool_call={"name": name, "args": {}, "id": call_id, "type": "tool_call"},
        tool=None,
        state={},
        runtime=runtime_for(thread),
    )


def tools_of(middleware: ToolOutputOffloadMiddleware) -> dict[str, BaseTool]:
    return {t.name: t for t in middleware.tools}


def page_through(read: BaseTool, artifact_id: str, thread: str = "t1") -> tuple[str, int]:
    """Rebuild an artifact from `read_offloaded` output alone; returns (text, calls)."""
    parts: list[str] = []
    offset: int | None = 0
    calls = 0
    while offset is not None:
        out = read.invoke(
            {"artifact_id": artifact_id, "offset": offset, "runtime": runtime_for(thread)}
        )
        calls += 1
        lines = out.split("\n")
        offset = None
        for line in lines[1:]:
            if (m := NEXT.match(line)) is not None:
                offset = int(m.group(2))
                continue
            if line == "[end of artifact]":
                continue
            row = ROW.match(line)
            assert row is not None, line
            if parts and row.group(2) == " ":
                parts.append("\n")
            parts.append(row.group(3))
    return "".join(parts), calls


@pytest.fixture
def middleware(tmp_path: Path) -> ToolOutputOffloadMiddleware:
    return ToolOutputOffloadMiddleware(store=FilesystemArtifactStore(tmp_path / "artifacts"))


def _offloaded(result: ToolMessage | Command[Any]) -> tuple[ToolMessage, list[dict[str, Any]]]:
    assert isinstance(result, Command)
    assert isinstance(result.update, dict)
    (message,) = result.update["messages"]
    assert isinstance(message, ToolMessage)
    return message, result.update["offloads"]


def test_200k_result_is_offloaded_and_fully_recoverable(
    middleware: ToolOutputOffloadMiddleware,
) -> None:
    text = big_output()
    assert len(text) == 200_000
    original = ToolMessage(
        content=text, tool_call_id="call-1", name="search_corpus", id="msg-1", status="success"
    )
    message, offloads = _offloaded(
        middleware.wrap_tool_call(call("search_corpus"), lambda _: original)
    )
    assert len(message.text) <= 12_000
    ref = message.additional_kwargs[OFFLOAD_FLAG]
    assert offloads == [ref]
    assert ref["artifact_id"] in message.text
    assert "200,000 characters" in message.text and f"~{ref['tokens']:,} tokens" in message.text
    assert "read_offloaded" in message.text and "search_offloaded" in message.text
    assert (message.tool_call_id, message.name, message.id, message.status) == (
        "call-1",
        "search_corpus",
        "msg-1",
        "success",
    )
    tools = tools_of(middleware)
    rebuilt, calls = page_through(tools["read_offloaded"], ref["artifact_id"])
    assert hashlib.sha256(rebuilt.encode()).hexdigest() == ref["sha256"]
    assert rebuilt == text and calls > 1
    found = tools["search_offloaded"].invoke(
        {"artifact_id": ref["artifact_id"], "pattern": "NEEDLE-7f3a", "runtime": runtime_for("t1")}
    )
    row = int(re.search(r"^\s*(\d+): .*NEEDLE-7f3a", found, re.M).group(1))  # type: ignore[union-attr]
    assert row == text[: text.index("NEEDLE")].count("\n") + 1
    regex = tools["search_offloaded"].invoke(
        {
            "artifact_id": ref["artifact_id"],
            "pattern": r"NEEDLE-[0-9a-f]{4}$",
            "regex": True,
            "runtime": runtime_for("t1"),
        }
    )
    assert f"{row}: near the end: NEEDLE-7f3a" in regex


def test_small_and_exempt_results_are_untouched(middleware: ToolOutputOffloadMiddleware) -> None:
    small = ToolMessage(content="fine", tool_call_id="call-1", name="grep")
    assert middleware.wrap_tool_call(call("grep"), lambda _: small) is small
    exempt = ToolMessage(content=big_output(), tool_call_id="call-1", name="read_offloaded")
    assert middleware.wrap_tool_call(call("read_offloaded"), lambda _: exempt) is exempt
    unnamed = ToolMessage(content=big_output(), tool_call_id="call-1")
    assert middleware.wrap_tool_call(call("search_offloaded"), lambda _: unnamed) is unnamed
    disabled = ToolOutputOffloadMiddleware(
        store=middleware.store, tool_token_limit=0, add_tools=False
    )
    big = ToolMessage(content=big_output(), tool_call_id="call-1", name="x")
    assert disabled.wrap_tool_call(call("x"), lambda _: big) is big
    assert disabled.tools == []


def test_failing_store_clips_inline_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    middleware = ToolOutputOffloadMiddleware(store=FailingArtifactStore(tmp_path / "a"))
    text = big_output()
    original = ToolMessage(content=text, tool_call_id="call-1", name="search_corpus", id="m1")
    with caplog.at_level(logging.ERROR):
        result = middleware.wrap_tool_call(
            call("search_corpus", thread="thread-42"), lambda _: original
        )
    assert isinstance(result, ToolMessage)  # no offload event: nothing was stored
    assert len(result.text) <= 12_000
    assert OFFLOAD_FLAG not in result.additional_kwargs
    assert result.additional_kwargs[CLIPPED_FLAG]["chars"] == 200_000
    assert "could not be stored" in result.text and not ID.search(result.text)
    assert text[:1000] in result.text and text[-500:] in result.text
    assert (result.tool_call_id, result.name, result.id) == ("call-1", "search_corpus", "m1")
    assert "thread-42" in caplog.text and "No space left" in caplog.text
    assert not list((tmp_path / "a").rglob("*.txt"))


async def test_async_wrapper_and_langgraph_store() -> None:
    store = StoreArtifactStore(InMemoryStore())
    middleware = ToolOutputOffloadMiddleware(store=store)
    text = big_output(60_000)
    original = ToolMessage(content=text, tool_call_id="call-1", name="fetch")

    async def handler(_: ToolCallRequest) -> ToolMessage:
        return original

    message, _ = _offloaded(await middleware.awrap_tool_call(call("fetch", "t9"), handler))
    ref = message.additional_kwargs[OFFLOAD_FLAG]
    assert await store.aget("t9", ref["artifact_id"]) == text
    read = tools_of(middleware)["read_offloaded"]
    out = await read.ainvoke(
        {"artifact_id": ref["artifact_id"], "offset": 0, "limit": 3, "runtime": runtime_for("t9")}
    )
    assert out.splitlines()[1].endswith(text.splitlines()[0])


def test_tool_returning_a_command_keeps_its_update(middleware: ToolOutputOffloadMiddleware) -> None:
    inner = ToolMessage(content=big_output(30_000), tool_call_id="call-1", name="crawl")
    command = Command(update={"messages": [inner], "todos": ["x"]})
    result = middleware.wrap_tool_call(call("crawl"), lambda _: command)
    assert isinstance(result, Command) and isinstance(result.update, dict)
    assert result.update["todos"] == ["x"]
    (message,) = result.update["messages"]
    assert message.additional_kwargs[OFFLOAD_FLAG]["artifact_id"] in message.text
    assert [e["source"] for e in result.update["offloads"]] == ["crawl"]


@pytest.mark.parametrize(
    "text",
    [
        "大规模语料检索结果。" * 12_000,
        json.dumps(
            [{"title": f"doc {i}", "body": "naïve “quoted” \\ text 😀"} for i in range(4000)]
        ),
    ],
    ids=["cjk", "json"],
)
def test_cjk_and_json_results_are_split_safely(
    middleware: ToolOutputOffloadMiddleware, text: str
) -> None:
    original = ToolMessage(content=text, tool_call_id="call-1", name="search")
    message, _ = _offloaded(middleware.wrap_tool_call(call("search"), lambda _: original))
    preview = message.text.split("\n----\n", 1)[1]
    head, tail = re.split(r"\n\[\.\.\. [\d,]+ characters.*omitted \.\.\.\]\n", preview)
    assert text.startswith(head) and text.endswith(tail)
    if text.startswith("["):  # ensure_ascii JSON: escapes are whole at both cuts
        assert not re.search(r"\\(u[0-9a-f]{0,3})?$", head)
        assert re.match(r"(?:[^\\]|\\u[0-9a-f]{4}|\\[\"\\])", tail)
        assert not tail.startswith("\\udc") and not tail.startswith("\\ude")
    else:
        assert head.endswith("。")
    ref = message.additional_kwargs[OFFLOAD_FLAG]
    rebuilt, _ = page_through(tools_of(middleware)["read_offloaded"], ref["artifact_id"])
    assert rebuilt == text


def test_tools_return_short_errors(middleware: ToolOutputOffloadMiddleware) -> None:
    tools = tools_of(middleware)
    rt = runtime_for("t1")
    missing = tools["read_offloaded"].invoke({"artifact_id": "art_" + "0" * 24, "runtime": rt})
    assert missing.startswith("Error:") and "not found" in missing
    ref = middleware.store.put("t1", "abc\ndef", source="x", kind="tool")
    bad = tools["search_offloaded"].invoke(
        {"artifact_id": ref.artifact_id, "pattern": "([", "regex": True, "runtime": rt}
    )
    assert bad.startswith("Error: invalid regular expression")
    other_thread = tools["read_offloaded"].invoke(
        {"artifact_id": ref.artifact_id, "runtime": runtime_for("t2")}
    )
    assert other_thread.startswith("Error:") and "not found" in other_thread


def test_catastrophic_regex_is_stopped_by_the_time_budget(tmp_path: Path) -> None:
    store = FilesystemArtifactStore(tmp_path)
    ref = store.put("t1", "ok line\n" + "a" * 40 + "\nafter", source="x", kind="tool")
    result = store.search("t1", ref.artifact_id, r"(a|a)*!", regex=True, timeout_seconds=0.5)
    assert result.stopped_reason == "time budget" and not result.complete
    quick = store.search("t1", ref.artifact_id, r"^ok", regex=True, timeout_seconds=5)
    assert [m.row for m in quick.matches] == [0] and quick.complete


def _runtime_with_thread(thread: str) -> Runtime[Any]:
    info = ExecutionInfo(checkpoint_id="c", checkpoint_ns="", task_id="t", thread_id=thread)
    return Runtime(execution_info=info)


def test_oversized_human_message_is_stored_verbatim(tmp_path: Path) -> None:
    store = FilesystemArtifactStore(tmp_path)
    middleware = ToolOutputOffloadMiddleware(store=store, human_token_limit=1000)
    pasted = "粘贴的长文本，" * 2000 + "\nEND"
    small = HumanMessage("short question", id="h0")
    big = HumanMessage(pasted, id="h1")
    update = middleware.before_model({"messages": [small, big]}, _runtime_with_thread("t5"))
    assert update is not None
    (message,) = update["messages"]
    assert isinstance(message, HumanMessage) and message.id == "h1"
    ref = message.additional_kwargs[OFFLOAD_FLAG]
    assert update["offloads"] == [ref] and ref["kind"] == "human"
    assert store.get("t5", ref["artifact_id"]) == pasted
    assert "user message" in message.text and len(message.text) < len(pasted)
    # Already offloaded messages and small ones are left alone on the next call.
    assert (
        middleware.before_model({"messages": [small, message]}, _runtime_with_thread("t5")) is None
    )


def test_a_run_start_counts_only_user_texts_it_has_not_found_small(tmp_path: Path) -> None:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text)

    middleware = ToolOutputOffloadMiddleware(
        store=FilesystemArtifactStore(tmp_path), human_token_limit=100, count_tokens=count
    )
    history = [HumanMessage(f"question {n}", id=f"h{n}") for n in range(5)]
    runtime = _runtime_with_thread("t9")
    assert middleware.before_model({"messages": history}, runtime) is None
    assert len(counted) == 5
    # The next run reads the history decoded anew (other objects), one message edited since.
    middleware.new_run("t9")
    counted.clear()
    decoded = [m.model_copy(deep=True) for m in history]
    decoded[2] = HumanMessage("pasted " * 50, id="h2")
    update = middleware.before_model({"messages": decoded}, runtime)
    assert counted == [decoded[2].content]
    assert update is not None and [m.id for m in update["messages"]] == ["h2"]
    # Another thread with the same message ids is counted on its own.
    middleware.new_run("t10")
    counted.clear()
    assert middleware.before_model({"messages": history}, _runtime_with_thread("t10")) is None
    assert len(counted) == 5


def test_human_offload_failure_leaves_the_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    middleware = ToolOutputOffloadMiddleware(
        store=FailingArtifactStore(tmp_path), human_token_limit=100
    )
    with caplog.at_level(logging.ERROR):
        update = middleware.before_model(
            {"messages": [HumanMessage("x " * 5000, id="h1")]}, _runtime_with_thread("t7")
        )
    assert update is None
    assert "t7" in caplog.text


async def test_async_human_offload_without_thread(tmp_path: Path) -> None:
    store = FilesystemArtifactStore(tmp_path)
    middleware = ToolOutputOffloadMiddleware(store=store, human_token_limit=100)
    update = await middleware.abefore_model(
        {"messages": [HumanMessage("y " * 5000, id="h1")]}, Runtime()
    )
    assert update is not None
    assert [r.thread_id for r in store.list(NO_THREAD_ID)] == [NO_THREAD_ID]


def test_from_config(tmp_path: Path) -> None:
    config = FoldwiseConfig(
        offload=OffloadConfig(
            root=str(tmp_path / "art"),
            tool_token_limit=1401,
            exempt_tools=["cat"],
            preview_chars=900,
        )
    )
    middleware = ToolOutputOffloadMiddleware.from_config(config)
    assert isinstance(middleware.store, FilesystemArtifactStore)
    assert middleware.store.root == str((tmp_path / "art").resolve())
    assert (middleware.tool_token_limit, middleware.preview_chars) == (1401, 900)
    assert middleware.exempt_tools == {"cat"}
    shared = ToolOutputOffloadMiddleware.from_config(config.offload, store=InMemoryStore())
    assert isinstance(shared.store, StoreArtifactStore)
    off = ToolOutputOffloadMiddleware.from_config(OffloadConfig(enabled=False, root=str(tmp_path)))
    assert off.tools == []


def test_collect_garbage_uses_config(tmp_path: Path) -> None:
    config = OffloadConfig(root=str(tmp_path / "art"), max_age_days=1.0)
    store = FilesystemArtifactStore(config.root)
    ref = store.put("t1", "old", source="x", kind="tool")
    report = collect_garbage(config, now=ref.created.replace(year=ref.created.year + 1))
    assert report.removed_ids == [ref.artifact_id]
    assert store.list("t1") == []


# -- end to end ----------------------------------------------------------------------------

CORPUS = big_output(120_000, marker="ZEBRA-42")


@tool
def search_corpus(query: str) -> str:
    """Search the corpus."""
    return CORPUS


def _offload_id(messages: list[BaseMessage]) -> str:
    last = messages[-1]
    assert isinstance(last, ToolMessage)
    return str(last.additional_kwargs[OFFLOAD_FLAG]["artifact_id"])


@pytest.fixture
def e2e(tmp_path: Path) -> tuple[Any, ScriptedChatModel, BaseArtifactStore]:
    store = FilesystemArtifactStore(tmp_path / "artifacts")
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "", tool_calls=[{"name": "search_corpus", "args": {"query": "q"}, "id": "c1"}]
            ),
            lambda messages: AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "search_offloaded",
                        "args": {"artifact_id": _offload_id(messages), "pattern": "ZEBRA"},
                        "id": "c2",
                    }
                ],
            ),
            "The marker is ZEBRA-42.",
        ]
    )
    agent = create_agent(
        model,
        tools=[search_corpus],
        middleware=[ToolOutputOffloadMiddleware(store=store)],
        checkpointer=InMemorySaver(),
    )
    return agent, model, store


def _check_run(out: dict[str, Any], model: ScriptedChatModel, store: BaseArtifactStore) -> None:
    second_request = model.requests[1].messages
    tool_message = second_request[-1]
    assert isinstance(tool_message, ToolMessage)
    assert CORPUS not in tool_message.text and len(tool_message.text) <= 12_000
    assert "[... " in tool_message.text and CORPUS[:500] in tool_message.text
    (event,) = out["offloads"]
    assert event["artifact_id"] in tool_message.text
    assert event["source"] == "search_corpus" and event["meta"]["tool_call_id"] == "c1"
    assert store.get("th-1", event["artifact_id"]) == CORPUS
    search_result = model.requests[2].messages[-1]
    assert "ZEBRA-42" in search_result.text
    assert {t.name for t in model.requests[0].tools} >= {"read_offloaded", "search_offloaded"}
    assert out["messages"][-1].text == "The marker is ZEBRA-42."


def test_create_agent_end_to_end(e2e: tuple[Any, ScriptedChatModel, BaseArtifactStore]) -> None:
    agent, model, store = e2e
    out = agent.invoke(
        {"messages": [HumanMessage("find the marker")]}, {"configurable": {"thread_id": "th-1"}}
    )
    _check_run(out, model, store)


async def test_create_agent_end_to_end_async(
    e2e: tuple[Any, ScriptedChatModel, BaseArtifactStore],
) -> None:
    agent, model, store = e2e
    out = await agent.ainvoke(
        {"messages": [HumanMessage("find the marker")]}, {"configurable": {"thread_id": "th-1"}}
    )
    _check_run(out, model, store)


def test_create_agent_offloads_pasted_input(tmp_path: Path) -> None:
    store = FilesystemArtifactStore(tmp_path)
    model = ScriptedChatModel(responses=["got it"])
    agent = create_agent(
        model,
        middleware=[ToolOutputOffloadMiddleware(store=store, human_token_limit=2000)],
        checkpointer=InMemorySaver(),
    )
    pasted = "Please summarise this log:\n" + "\n".join(f"log line {i}" for i in range(5000))
    config = {"configurable": {"thread_id": "th-2"}}
    out = agent.invoke({"messages": [HumanMessage(pasted, id="paste-1")]}, config)
    (request,) = model.requests
    (seen,) = request.messages
    assert seen.id == "paste-1" and pasted not in seen.text and "art_" in seen.text
    (event,) = out["offloads"]
    assert store.get("th-2", event["artifact_id"]) == pasted
    assert out["messages"][0].id == "paste-1"
    assert len(agent.get_state(config).values["messages"]) == 2


def test_from_config_passes_every_same_named_offload_option(tmp_path: Path) -> None:
    from foldwise.config import OffloadConfig

    config = OffloadConfig(
        root=str(tmp_path / "a"),
        enabled=True,
        archive_compacted=False,
        tool_token_limit=7,
        human_token_limit=9,
        exempt_tools=["x"],
        preview_chars=321,
        max_bytes_per_thread=4096,
    )
    middleware = ToolOutputOffloadMiddleware.from_config(config, add_tools=False)
    assert (middleware.tool_token_limit, middleware.human_token_limit) == (7, 9)
    assert (middleware.preview_chars, middleware.archive_compacted) == (321, False)
    assert middleware.exempt_tools == frozenset({"x"}) and middleware.tools == []
    store = middleware.store
    assert isinstance(store, FilesystemArtifactStore) and store.max_bytes_per_thread == 4096
    assert store.put("t", "hello", source="s", kind="tool")
    assert (tmp_path / "a").is_dir()
