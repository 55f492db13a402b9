"""`fuse`: foldwise's hooks in fewer graph nodes, with the same behaviour as the separate stack."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent as lc_create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import foldwise
import foldwise.agent as agent_module
from foldwise.config import parse_config
from foldwise.middleware._fused import fuse
from foldwise.state import FoldwiseState
from foldwise.testing import ScriptedChatModel

THREAD: RunnableConfig = {"configurable": {"thread_id": "f1"}}
SKILL = "---\nname: pricing\ndescription: price things\n---\nbody\n"


# -- the real stack: fused and separate give the same thread and the same requests -----------


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return SKILL


@tool
def task(description: str, subagent_type: str) -> str:
    """Delegate to a sub-agent."""
    return "done"


@tool
def search(query: str) -> str:
    """Search."""
    return "result " * 1500


def _script() -> list[AIMessage]:
    def call(name: str, cid: str, args: dict[str, Any]) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "id": cid, "args": args}])

    return [
        call("read_file", "r1", {"path": "/mnt/skills/pricing/SKILL.md"}),
        call("task", "t1", {"description": "dig", "subagent_type": "r"}),
        call("search", "s1", {"query": "big"}),
    ]


def _agent(
    tmp_path: Path, *, fused: bool, monkeypatch: pytest.MonkeyPatch, run_ids: bool = False
) -> tuple[Any, Any]:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        if messages and "<new_messages>" in str(messages[0].content):
            return AIMessage("the summary")
        return AIMessage("ok")

    model = ScriptedChatModel(responses=_script(), default=respond)
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 8},
                "keep": {"type": "messages", "value": 3},
                "min_gain_tokens": 0,
                "fallback": None,
            },
            "offload": {
                "root": str(tmp_path / ("fused" if fused else "separate")),
                "preview_chars": 200,
                "tool_token_limit": 800,
                "human_token_limit": 800,
            },
        }
    )
    if not fused:
        monkeypatch.setattr(agent_module, "_fused", lambda middlewares, *_: middlewares)
    agent = foldwise.create_agent(
        config,
        model=model,
        tools=[read_file, task, search],
        checkpointer=InMemorySaver(),
        runs_carry_ids=run_ids,
    )
    monkeypatch.undo()
    return agent, model


_VOLATILE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|lc_[0-9a-f]+|run-[\w-]+"
    r"|\d{4}-\d\d-\d\dT[\d:.+Z-]+|\b\d{10}(\.\d+)?\b|(separate|fused)(?=[/\"])"
)


def _plain(value: Any) -> str:
    """A comparable text: ids, timestamps and the two artifact roots blanked."""
    if isinstance(value, BaseMessage):
        value = {
            "type": value.type,
            "content": value.content,
            "tool_calls": getattr(value, "tool_calls", None),
            "kwargs": {k: v for k, v in value.additional_kwargs.items() if k != "usage"},
        }
    text = json.dumps(value, default=_plain_default, sort_keys=True)
    return _VOLATILE.sub("X", text)


def _plain_default(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return json.loads(_plain(value))
    return repr(value)


def _turns(agent: Any, *, use_async: bool, run_ids: bool = False) -> None:
    inputs = ["start", "pasted " + "word " * 1500, *[f"turn {i}" for i in range(6)]]
    for index, text in enumerate(inputs):
        payload = {"messages": [HumanMessage(text)]}
        config: RunnableConfig = {**THREAD, "run_id": uuid.uuid4()} if run_ids else THREAD
        if use_async:
            asyncio.run(agent.ainvoke(payload, config))
        else:
            agent.invoke(payload, config)
        if index == 0:
            _complete_task(agent)


def _complete_task(agent: Any) -> None:
    """Between runs, edit the task's result in place (as a sub-agent runner would)."""
    messages = agent.get_state(THREAD).values["messages"]
    result = next(m for m in messages if getattr(m, "tool_call_id", None) == "t1")
    done = {"subagent_status": "completed", "subagent_result_brief": "priced"}
    edited = result.model_copy(update={"additional_kwargs": done})
    agent.update_state(THREAD, {"messages": [edited]})


@pytest.mark.parametrize("run_ids", [False, True], ids=["hooks", "run-ids"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_fused_and_separate_stacks_give_the_same_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_async: bool, run_ids: bool
) -> None:
    runs = {}
    for fused in (True, False):
        agent, model = _agent(
            tmp_path, fused=fused, monkeypatch=monkeypatch, run_ids=run_ids and fused
        )
        _turns(agent, use_async=use_async, run_ids=run_ids)
        state = agent.get_state(THREAD).values
        checkpoints = len(list(agent.checkpointer.list(THREAD)))
        runs[fused] = (state, model.requests, checkpoints)
    (fused_state, fused_requests, fused_count), (state, requests, count) = runs[True], runs[False]
    assert fused_state["compactions"]
    assert [d["status"] for d in fused_state["delegations"]] == ["completed"]
    assert fused_state["skill_context"] and fused_state["offloads"]
    assert {o.get("kind") for o in fused_state["offloads"]} >= {"human", "tool"}
    for key in ("messages", "summary_text", "delegations", "skill_context", "offloads"):
        assert _plain(fused_state[key]) == _plain(state[key]), key
    receipts = [
        {k: r[k] for k in ("trigger", "tokens_before", "messages_removed", "reason")}
        for r in state["compactions"]
    ]
    assert [
        {k: r[k] for k in ("trigger", "tokens_before", "messages_removed", "reason")}
        for r in fused_state["compactions"]
    ] == (receipts)
    assert len(fused_requests) == len(requests)
    for sent, expected in zip(fused_requests, requests, strict=True):
        assert [_plain(m) for m in sent.messages] == [_plain(m) for m in expected.messages]
    assert fused_count < count  # three fewer checkpoints per model call


def test_a_one_call_turn_writes_five_checkpoints_not_eight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = {}
    for fused in (True, False):
        agent, _ = _agent(tmp_path, fused=fused, monkeypatch=monkeypatch)
        agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)  # the scripted tool calls
        before = len(list(agent.checkpointer.list(THREAD)))
        agent.invoke({"messages": [HumanMessage("again")]}, THREAD)  # one model call
        added[fused] = len(list(agent.checkpointer.list(THREAD))) - before
        nodes = set(agent.get_graph().nodes)
        if fused:
            assert "SummarizationMiddleware.before_model" in nodes
            assert not any(n.startswith("DurableContextMiddleware") for n in nodes)
            assert not any(n.startswith("ToolOutputOffloadMiddleware") for n in nodes)
    # input, start, before_agent, before_model, model; the separate stack adds the durable
    # capture before and after the model and the offload middleware's own pasted-input check.
    assert added == {True: 5, False: 8}


def test_with_run_ids_a_one_call_turn_writes_four_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _ = _agent(tmp_path, fused=True, monkeypatch=monkeypatch, run_ids=True)
    agent.invoke({"messages": [HumanMessage("hi")]}, {**THREAD, "run_id": uuid.uuid4()})
    before = len(list(agent.checkpointer.list(THREAD)))
    agent.invoke({"messages": [HumanMessage("again")]}, {**THREAD, "run_id": uuid.uuid4()})
    assert len(list(agent.checkpointer.list(THREAD))) - before == 4
    assert not any(n.endswith(".before_agent") for n in agent.get_graph().nodes)


class _Starts(AgentMiddleware[Any, Any, Any]):
    """Counts run starts; writes a channel at each so the update path is exercised."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.starts += 1
        return {"summary_text": f"start {self.starts}"}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def test_with_run_ids_the_run_start_hooks_run_once_per_run() -> None:
    call = {"name": "echo", "id": "e", "args": {"text": "x"}}
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")] * 3)
    starts = _Starts()
    agent = lc_create_agent(
        model,
        tools=[echo],
        middleware=fuse([starts, _First()], name="stack", runs_have_ids=True),
        state_schema=FoldwiseState,
        checkpointer=InMemorySaver(),
    )
    for run in range(2):
        config: RunnableConfig = {**THREAD, "run_id": uuid.uuid4()}
        values = agent.invoke({"messages": [HumanMessage(f"go {run}")]}, config)
        assert starts.starts == run + 1  # two model calls in the run, one start
        assert values["summary_text"] == "first"  # written after the start, in the same node
    agent.invoke({"messages": [HumanMessage("no id")]}, THREAD)
    assert starts.starts == 4  # without a run id every model call counts as a start


# -- the combination rules, with toy members ------------------------------------------------


class _First(AgentMiddleware[Any, Any, Any]):
    state_schema = FoldwiseState

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"messages": [AIMessage("note", id="note")], "summary_text": "first"}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


class _Second(AgentMiddleware[Any, Any, Any]):
    """Sees the first member's writes; removes its note again and overrides its summary."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str | None, list[str]]] = []
        self.after: list[str] = []

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.seen.append((state.get("summary_text"), [m.id for m in state["messages"]]))
        if any(m.id == "note" for m in state["messages"]):
            return {"messages": [RemoveMessage(id="note")], "summary_text": "second"}
        return None

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.after.append(str(state["messages"][-1].content))
        return {"summary_text": f"after {state['messages'][-1].content}"}


class _AsyncOnly(_Second):
    """Every sync hook raises: the async graph must use the async twins only."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        raise AssertionError("sync before_model called on the async path")

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        raise AssertionError("sync after_model called on the async path")

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return _Second.before_model(self, state, runtime)

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return _Second.after_model(self, state, runtime)


def _toy_agent(middleware: list[AgentMiddleware[Any, Any, Any]]) -> Any:
    return lc_create_agent(
        ScriptedChatModel(responses=[AIMessage("answer")] * 4),
        middleware=middleware,
        state_schema=FoldwiseState,
        checkpointer=InMemorySaver(),
    )


def test_writes_are_applied_in_order_as_separate_nodes_apply_them() -> None:
    results = []
    for fused in (True, False):
        second = _Second()
        members: list[AgentMiddleware[Any, Any, Any]] = [_First(), second]
        agent = _toy_agent(fuse(members, name="stack") if fused else members)
        agent.invoke({"messages": [HumanMessage("hi", id="h")]}, THREAD)
        state = agent.get_state(THREAD).values
        messages = [(m.type, m.content) for m in state["messages"]]
        results.append((messages, state["summary_text"], second.seen))
        assert second.after == ["answer"]
    assert results[0][0] == results[1][0] == [("human", "hi"), ("ai", "answer")]
    assert results[0][1] == results[1][1] == "after answer"
    assert results[0][2] == results[1][2] == [("first", ["h", "note"])]


@pytest.mark.parametrize("fold", [True, False], ids=["folded", "after-model-node"])
def test_the_async_path_uses_only_the_async_twins(fold: bool) -> None:
    member = _AsyncOnly()
    agent = _toy_agent(fuse([_First(), member], name="stack", fold_after_model=fold))

    async def main() -> Any:
        return await agent.ainvoke({"messages": [HumanMessage("hi", id="h")]}, THREAD)

    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    try:
        values = loop.run_until_complete(main())
    finally:
        loop.close()
    assert values["summary_text"] == "after answer"
    assert member.seen == [("first", ["h", "note"])]


def test_a_command_from_an_inner_layer_is_written_with_after_model_updates() -> None:
    class Layer(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
            response: ModelResponse[Any] = handler(request)
            return ExtendedModelResponse(
                model_response=response, command=Command(update={"summary_text": "layer"})
            )

    class Reader(AgentMiddleware[Any, Any, Any]):
        def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return {"skill_context": [{"path": "/p", "name": "n"}]}

    agent = _toy_agent(fuse([Reader(), Layer()], name="stack"))
    values = agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    assert values["summary_text"] == "layer"
    assert [s["path"] for s in values["skill_context"]] == ["/p"]
    assert not any(n.endswith("after_model") for n in agent.get_graph().nodes)


def test_a_hook_that_can_jump_is_not_fused() -> None:
    class Jumper(AgentMiddleware[Any, Any, Any]):
        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return None

    with pytest.raises(ValueError, match=r"Jumper\.before_model can jump"):
        fuse([Jumper()], name="stack")


def test_tools_of_members_are_offered_once() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look up."""
        return key

    class WithTool(AgentMiddleware[Any, Any, Any]):
        tools = [lookup]

    fused = fuse([WithTool(), _First()], name="stack")
    assert [t.name for t in fused[0].tools] == ["lookup"]
    with pytest.raises(ValueError, match="at least one"):
        fuse([], name="stack")


# -- a middleware placed after foldwise's keeps LangChain's hook order -----------------------


class _Guard(AgentMiddleware[Any, Any, Any]):
    """Discards the first answer (a `task` call) and asks the model again."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.seen.append(sorted(key for key in state if state.get(key)))
        if state["messages"][-1].id == "bad":
            return {"messages": [RemoveMessage(id="bad")], "jump_to": "model"}
        return None


def test_a_later_after_model_runs_before_foldwise_sees_the_answer() -> None:
    """The durable capture must not record a delegation from an answer a guard threw away."""
    dispatch = {"name": "task", "id": "t9", "args": {"description": "drop", "subagent_type": "r"}}
    model = ScriptedChatModel(
        responses=[AIMessage("", id="bad", tool_calls=[dispatch]), AIMessage("fine")],
        default=lambda _: AIMessage("more"),
    )
    guard = _Guard()
    agent = foldwise.create_agent(
        parse_config({"summarization": {"fallback": None}}),
        model=model,
        tools=[task],
        checkpointer=InMemorySaver(),
        middleware=[guard],
    )
    agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    agent.invoke({"messages": [HumanMessage("again")]}, THREAD)
    assert not agent.get_state(THREAD).values.get("delegations")
    assert guard.seen[0] == ["messages"]  # as with the separate stack: nothing captured yet
    assert not any("drop" in str(m.content) for m in model.requests[-1].messages)
    assert "SummarizationMiddleware.after_model" in agent.get_graph().nodes


class _Opening(AgentMiddleware[Any, Any, Any]):
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


def test_a_later_before_agent_keeps_foldwise_run_start_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = foldwise.create_agent(
        parse_config({}),
        model=ScriptedChatModel(responses=[AIMessage("ok")]),
        checkpointer=InMemorySaver(),
        middleware=[_Opening()],
        runs_carry_ids=True,
    )
    config: RunnableConfig = {**THREAD, "run_id": uuid.uuid4()}
    chunks = agent.stream({"messages": [HumanMessage("hi")]}, config, stream_mode="updates")
    nodes = [name for chunk in chunks for name in chunk]
    start = nodes.index("SummarizationMiddleware.before_agent")
    assert start < nodes.index("_Opening.before_agent")


class _Twice(AgentMiddleware[Any, Any, Any]):
    """Calls the model twice and keeps the second answer (a retry)."""

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        handler(request)
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        await handler(request)
        return await handler(request)


class _Noting(AgentMiddleware[Any, Any, Any]):
    """Writes a note with every answer."""

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return ExtendedModelResponse(
            model_response=handler(request), command=Command(update={"messages": [AIMessage("n")]})
        )

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        return ExtendedModelResponse(
            model_response=await handler(request),
            command=Command(update={"messages": [AIMessage("n")]}),
        )


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_retried_inner_layer_writes_only_its_last_attempt(use_async: bool) -> None:
    agent = _toy_agent(fuse([_Twice(), _Noting()], name="stack"))
    payload = {"messages": [HumanMessage("hi")]}
    if use_async:
        values = asyncio.run(agent.ainvoke(payload, THREAD))
    else:
        values = agent.invoke(payload, THREAD)
    assert [m.content for m in values["messages"]] == ["hi", "answer", "n"]  # as LangChain's


class _OnlyAsync(AgentMiddleware[Any, Any, Any]):
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"summary_text": "async"}


def test_an_async_only_hook_fails_a_sync_run_as_langchain_does() -> None:
    agent = _toy_agent(fuse([_OnlyAsync()], name="stack"))
    with pytest.raises(TypeError, match=r"_OnlyAsync\.before_model has only an async form"):
        agent.invoke({"messages": [HumanMessage("hi")]}, THREAD)
    values = asyncio.run(agent.ainvoke({"messages": [HumanMessage("hi")]}, THREAD))
    assert values["summary_text"] == "async"
