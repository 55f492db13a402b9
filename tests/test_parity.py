"""Parity: the same scenarios through `invoke` and `ainvoke` end in the same state.

foldwise writes each sync/async pair once (`foldwise._steps`); this suite checks from the
outside that the two paths cannot drift: compaction with archive and pasted-input offload,
tool-output offload with paging, overflow recovery, summarizer failure and manual compaction.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.memory import InMemorySaver

import foldwise
from foldwise.config import parse_config
from foldwise.errors import SummaryGenerationError
from foldwise.testing import FailingChatModel, ScriptedChatModel
from foldwise.tokens import get_counter
from tests.support.async_only_store import AsyncOnlyStore

THREAD = {"configurable": {"thread_id": "parity"}}
_VOLATILE = {"id", "duration_ms", "created_at", "run_id", "recorded_at", "stored_at"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _plain(value: Any) -> Any:
    """A comparable form: messages by role and content, volatile fields dropped."""
    if isinstance(value, BaseMessage):
        calls = getattr(value, "tool_calls", None) or []
        return (
            value.type,
            _plain(value.content),
            [(c["name"], c["args"], c.get("id")) for c in calls],
            getattr(value, "tool_call_id", None),
            _plain(dict(value.additional_kwargs)),
        )
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items()) if k not in _VOLATILE}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    return value


Scenario = Callable[[Path], tuple[Any, list[dict[str, Any]]]]


def _compaction(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "all", "max_tokens": 200},
            },
            "offload": {"root": str(root), "human_token_limit": 5000},
        }
    )
    model = ScriptedChatModel(default="Edited src/app.py; tests pass. " * 5)
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    inputs = [
        {"messages": [HumanMessage(f"step {i}: " + "please refactor the module " * 30)]}
        for i in range(5)
    ]
    inputs.append({"messages": [HumanMessage("pasted: " + "ledger row 42, amount 17.5\n" * 900)]})
    return agent, inputs


def _tool_offload(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    @lc_tool
    def dump(n: int) -> str:
        """Return a big listing."""
        return "\n".join(f"{i:05d} entry value={i * 7 % 97}" for i in range(n))

    script = [
        AIMessage("", tool_calls=[{"name": "dump", "args": {"n": 6000}, "id": "d1"}]),
        lambda ms: AIMessage(
            "",
            tool_calls=[
                {
                    "name": "search_offloaded",
                    "args": {
                        "artifact_id": re.findall(r"art_[0-9a-f]{24}", str(ms[-1].content))[0],
                        "pattern": "05555",
                    },
                    "id": "s1",
                }
            ],
        ),
        "found it",
    ]
    model = ScriptedChatModel(responses=script, default="ok")
    config = parse_config({"offload": {"root": str(root)}})
    agent = foldwise.create_agent(config, model=model, tools=[dump], checkpointer=InMemorySaver())
    return agent, [{"messages": [HumanMessage("list everything and find entry 05555")]}]


def _overflow(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    estimate = get_counter()
    model = ScriptedChatModel(
        default="noted",
        context_window=1500,
        input_token_counter=lambda ms: 3 * estimate.count_messages(ms, anchor=False),
    )
    model.profile = {"max_input_tokens": 1500}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "reserved_output_tokens": 200,
                "min_gain_tokens": 0,
                "keep": {"type": "messages", "value": 2},
                "preserve_human": {"mode": "latest"},
            },
            # The double counts messages only, so no tool schemas it would not see.
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    return agent, [
        {"messages": [HumanMessage(f"note {i}: " + "the audit trail " * 40)]} for i in range(6)
    ]


def _failing_summarizer(root: Path) -> tuple[Any, list[dict[str, Any]]]:
    config = parse_config(
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 4},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
            },
            "offload": {"root": str(root)},
        }
    )
    model = ScriptedChatModel(default="answer " * 20)
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    middleware = foldwise.agent.find_summarization(agent)
    assert middleware is not None
    extractive = middleware.registry.get("extractive")
    middleware.compactor.resolve = lambda name: (
        extractive if name == "extractive" else FailingChatModel()
    )
    return agent, [{"messages": [HumanMessage(f"question {i}")]} for i in range(4)]


SCENARIOS: dict[str, Scenario] = {
    "compaction_archive_and_pasted_input": _compaction,
    "tool_offload_and_search": _tool_offload,
    "overflow_recovery": _overflow,
    "failing_summarizer_falls_back": _failing_summarizer,
}


EXPECTED_KINDS: dict[str, set[str]] = {
    "compaction_archive_and_pasted_input": {"archive", "human"},
    "tool_offload_and_search": {"tool", "archive"},
    "overflow_recovery": set(),
    "failing_summarizer_falls_back": {"archive"},
}


def _run_sync(scenario: Scenario, root: Path) -> dict[str, Any]:
    agent, inputs = scenario(root)
    for item in inputs:
        agent.invoke(item, THREAD)
    try:
        foldwise.compact_thread(agent, THREAD, keep={"type": "messages", "value": 1})
    except SummaryGenerationError as err:
        return {**agent.get_state(THREAD).values, "manual": str(err)}
    return dict(agent.get_state(THREAD).values)


def _run_async(scenario: Scenario, root: Path) -> dict[str, Any]:
    agent, inputs = scenario(root)  # building the graph is start-up work, not the loop's

    async def run() -> dict[str, Any]:
        for item in inputs:
            await agent.ainvoke(item, THREAD)
        try:
            await foldwise.acompact_thread(agent, THREAD, keep={"type": "messages", "value": 1})
        except SummaryGenerationError as err:
            return {**(await agent.aget_state(THREAD)).values, "manual": str(err)}
        return dict((await agent.aget_state(THREAD)).values)

    return asyncio.run(run(), debug=True)


def _slow_callbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "asyncio" and " took " in r.getMessage()
    ]


def _never_blocks(run: Callable[[Path], Any], tmp_path: Path, caplog: Any) -> Any:
    """Run twice at most: a loaded 2-core machine can stretch one CPU-bound callback past
    100 ms of wall time; a real blocking call (a sync store, a file write) does it every time."""
    caplog.set_level(logging.WARNING, logger="asyncio")
    slow: list[str] = []
    for attempt in range(2):
        caplog.clear()
        result = run(tmp_path / f"attempt{attempt}")
        slow = _slow_callbacks(caplog)
        if not slow:
            return result
    raise AssertionError(f"callbacks held the event loop over 100 ms: {slow}")


def test_the_whole_async_stack_on_an_async_only_store_in_debug_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Compaction, archive, pasted-input offload, tool offload and search on an async-only
    LangGraph store (sync methods raise), under asyncio debug mode: no blocking call."""
    backends: list[AsyncOnlyStore] = []

    def with_store(root: Path) -> tuple[Any, list[dict[str, Any]]]:
        _, inputs = _compaction(root)
        _, tool_inputs = _tool_offload(root)
        backends.append(AsyncOnlyStore())
        return _with_store(root, backends[-1]), [*inputs, *tool_inputs]

    state = _never_blocks(lambda root: _run_async(with_store, root), tmp_path, caplog)
    kinds = {o["kind"] for o in state.get("offloads") or []}
    assert {"archive", "human", "tool"} <= kinds, kinds
    assert all(backend.sync_calls == [] for backend in backends)


def _with_store(root: Path, backend: Any) -> Any:
    """The compaction scenario's configuration with the tool of the offload scenario."""

    @lc_tool
    def dump(n: int) -> str:
        """Return a big listing."""
        return "\n".join(f"{i:05d} entry value={i * 7 % 97}" for i in range(n))

    def brain(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "list everything" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "dump", "args": {"n": 6000}, "id": "d1"}])
        return AIMessage("Edited src/app.py; tests pass. " * 5)

    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "messages", "value": 6},
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "all", "max_tokens": 200},
            },
            "offload": {"root": str(root), "human_token_limit": 5000},
        }
    )
    return foldwise.create_agent(
        config,
        model=ScriptedChatModel(default=brain),
        tools=[dump],
        store=backend,
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_async_path_never_blocks_the_loop(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """asyncio debug mode logs every callback that holds the loop longer than 100 ms."""
    _never_blocks(lambda root: _run_async(SCENARIOS[name], root), tmp_path, caplog)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_sync_and_async_runs_end_in_the_same_state(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    sync_state = _run_sync(scenario, tmp_path / "sync")
    async_state = _run_async(scenario, tmp_path / "async")
    assert sync_state["compactions"], "every scenario compacts at least once"
    kinds = {o["kind"] for o in sync_state.get("offloads") or []}
    assert EXPECTED_KINDS[name] <= kinds, kinds
    assert _plain(sync_state) == _plain(async_state)
