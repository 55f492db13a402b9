"""Provider overflow recovery, the request budget and the retry's durable block (issue 10).

Items 4 (recover from the provider's numbers), 7 (the durable block counted once) and 11 (the
overflow retry renders every durable channel, custom ones included, once).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent as lc_create_agent
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool as lc_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

import foldwise
from foldwise.compaction import CompactionPolicy
from foldwise.config import parse_config
from foldwise.durable import (
    AUTHORITY_CONTRACT,
    DurableChannel,
    escape_value,
    is_durable_data_message,
)
from foldwise.messages import OFFLOAD_FLAG
from foldwise.middleware._request_fit import overflow_numbers
from foldwise.offload import FilesystemArtifactStore
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import get_counter

THREAD = {"configurable": {"thread_id": "t-overflow"}}


def _tool_loop_agent(calls: int) -> tuple[Any, ScriptedChatModel, list[int]]:
    """An agent whose provider counts 3x the estimate, in a 4,000-token window."""
    estimate = get_counter()
    done: list[int] = []

    @lc_tool
    def lookup(i: int) -> str:
        """Look something up."""
        done.append(i)
        return f"record {i}: " + "the ledger line was reconciled against the bank export. " * 25

    def next_step(messages: list[BaseMessage]) -> AIMessage:
        step = len(done)
        if step >= calls:
            return AIMessage("done")
        return AIMessage("", tool_calls=[{"name": "lookup", "args": {"i": step}, "id": f"c{step}"}])

    model = ScriptedChatModel(
        default=next_step,
        context_window=4000,
        input_token_counter=lambda ms: 3 * estimate.count_messages(ms, anchor=False),
    )
    model.profile = {"max_input_tokens": 4000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "reserved_output_tokens": 500,
                "min_gain_tokens": 0,
                "keep": {"type": "messages", "value": 4},
            },
            "offload": {"enabled": False},
        }
    )
    agent = foldwise.create_agent(config, model=model, tools=[lookup], checkpointer=InMemorySaver())
    return agent, model, done


def _overflows(model: ScriptedChatModel) -> int:
    estimate = get_counter()
    return sum(
        1 for r in model.requests if 3 * estimate.count_messages(r.messages, anchor=False) > 4000
    )


def test_a_3x_provider_in_a_4k_window_completes_a_12_call_tool_loop() -> None:
    agent, model, done = _tool_loop_agent(12)
    result = agent.invoke({"messages": [HumanMessage("Reconcile the 12 records.")]}, THREAD)
    assert result["messages"][-1].content == "done"
    assert done == list(range(12))
    # The first refusal calibrates the thread: later requests are planned in provider units.
    assert _overflows(model) <= 2
    receipts = agent.get_state(THREAD).values["compactions"]
    assert any(r["trigger"] == "overflow" for r in receipts)


def test_a_3x_provider_in_a_4k_window_completes_a_12_call_tool_loop_async() -> None:
    agent, model, done = _tool_loop_agent(12)

    async def run() -> dict[str, Any]:
        return await agent.ainvoke(
            {"messages": [HumanMessage("Reconcile the 12 records.")]}, THREAD
        )

    result = asyncio.run(run())
    assert result["messages"][-1].content == "done"
    assert done == list(range(12))
    assert _overflows(model) <= 2


def test_a_provider_counting_3x_less_in_a_smaller_window_than_configured_answers_every_turn(
    tmp_path: Any,
) -> None:
    """The faults area's overcount case: the latest turn alone is over the window left after
    the reserve *in estimate units*, so only the provider's own (lower) numbers make it fit."""
    estimate = get_counter()
    model = ScriptedChatModel(
        default="noted",
        usage=True,
        context_window=6000,
        input_token_counter=lambda ms: estimate.count_messages(ms, anchor=False) // 3,
    )
    model.profile = {"max_input_tokens": 128_000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "tokens", "value": 100_000},
                "keep": {"type": "messages", "value": 2},
            },
            "offload": {"root": str(tmp_path)},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    for turn in range(8):
        note = HumanMessage(f"note {turn}: " + " ".join(f"w{turn}x{i}" for i in range(600)))
        assert estimate.count_message(note) > 6000 - 4096  # alone over the estimate's budget
        result = agent.invoke({"messages": [note]}, THREAD)
        assert result["messages"][-1].content == "noted"
    receipts = agent.get_state(THREAD).values["compactions"]
    assert any(r["trigger"] == "overflow" for r in receipts)
    refused = sum(
        1 for r in model.requests if estimate.count_messages(r.messages, anchor=False) // 3 > 6000
    )
    assert refused <= 4


def test_a_tool_result_the_provider_has_room_for_is_not_clipped_because_the_estimate_overcounts(
    tmp_path: Any,
) -> None:
    """After a refusal from a provider counting 3x less, the retry is fitted in its units."""
    estimate = get_counter()

    @lc_tool
    def fetch() -> str:
        """Fetch the records."""
        return " ".join(f"r{i}y{i % 7}" for i in range(600))

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("fetched")
        if "fetch" in str(messages[-1].content):
            return AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "c1"}])
        return AIMessage("noted")

    model = ScriptedChatModel(
        default=brain,
        usage=True,
        context_window=6000,
        input_token_counter=lambda ms: estimate.count_messages(ms, anchor=False) // 3,
    )
    model.profile = {"max_input_tokens": 128_000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "trigger": {"type": "tokens", "value": 100_000},
                "keep": {"type": "messages", "value": 2},
            },
            "offload": {"root": str(tmp_path)},
        }
    )
    agent = foldwise.create_agent(config, model=model, tools=[fetch], checkpointer=InMemorySaver())
    for turn in range(5):
        note = f"note {turn}: " + " ".join(f"w{turn}x{i}" for i in range(600))
        agent.invoke({"messages": [HumanMessage(note)]}, THREAD)
    result = agent.invoke({"messages": [HumanMessage("now fetch the records")]}, THREAD)
    assert result["messages"][-1].content == "fetched"
    answered = model.requests[-1].messages
    assert estimate.count_messages(answered, anchor=False) // 3 <= 6000 - 4096
    assert not any("characters clipped" in str(m.content) for m in answered)


def test_an_unfittable_request_fails_with_a_clear_error_after_bounded_retries() -> None:
    def refuse(messages: list[BaseMessage]) -> AIMessage:
        raise AssertionError("never answered")

    model = ScriptedChatModel(default=refuse, context_window=1)
    config = parse_config({"summarization": {"model_name": "extractive", "min_gain_tokens": 0}})
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    from langchain_core.exceptions import ContextOverflowError

    with pytest.raises(ContextOverflowError, match="after compaction and clipping"):
        agent.invoke({"messages": [HumanMessage("hello there")]}, THREAD)
    assert len(model.requests) == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9,731 tokens.",
            (8192, 9731),
        ),
        (
            "Error code: 400 - Input tokens exceed the configured limit of 6000 tokens. Your "
            "messages resulted in 6,418 tokens. Please reduce the length of the messages.",
            (6000, 6418),
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", (200000, 210000)),
        ("context_length_exceeded: 12000 input tokens exceed the 4000-token window", (4000, 12000)),
        ("context window exceeded", (None, None)),
    ],
)
def test_provider_numbers_are_read_from_overflow_errors(
    text: str, expected: tuple[int | None, int | None]
) -> None:
    assert overflow_numbers(ValueError(text)) == expected


# -- item 7: the durable block is counted once -----------------------------------------------


def _request(
    messages: list[BaseMessage], state: dict[str, Any], model: ScriptedChatModel
) -> ModelRequest[Any]:
    return ModelRequest(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage("You are careful."),
        tools=[],
        state=state,  # type: ignore[arg-type]
        runtime=Runtime(context=None),
    )


def test_a_request_that_fits_is_not_clipped_because_the_block_was_counted_twice() -> None:
    model = ScriptedChatModel(default="ok")
    durable = foldwise.DurableContextMiddleware()
    summary = "Decisions so far: keep the public API; billing retries use backoff. " * 30
    messages: list[BaseMessage] = [
        HumanMessage("check the export", id="h1"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("row of the export, reconciled. " * 200, tool_call_id="c1", id="t1"),
    ]
    state = {"messages": messages, "summary_text": summary}
    projected = durable.project(_request(messages, state, model))
    counter = get_counter()
    total = counter.count_message(projected.system_message) + counter.count_messages(
        projected.messages, anchor=False
    )
    block = sum(
        counter.count_message(m) for m in projected.messages if m.id not in {"h1", "a1", "t1"}
    )
    assert block > 100
    # A budget the request fits with the block counted once, and would not with it counted twice.
    policy = CompactionPolicy(context_window=total + block // 2, reserved_output_tokens=0)
    middleware = foldwise.SummarizationMiddleware(
        model=model, policy=policy, counter=counter, durable=durable
    )
    sent, estimated = middleware._measure_and_fit(projected)
    assert estimated == total
    tool_view = next(m for m in sent.messages if isinstance(m, ToolMessage))
    assert "clipped" not in str(tool_view.content)


# -- item 11: the overflow retry renders every channel once ----------------------------------


def _pinned_agent(merge_contract: bool) -> tuple[Any, ScriptedChatModel]:
    def capture(messages: Any, state: Any) -> list[str] | None:
        pins = [
            str(m.content).removeprefix("PIN: ")
            for m in messages
            if isinstance(m, HumanMessage) and str(m.content).startswith("PIN: ")
        ]
        return pins or None

    pins = DurableChannel(
        "pinned",
        lambda value: "## Pinned\n" + "\n".join(f"- {escape_value(v)}" for v in value),
        reducer=lambda a, b: list(dict.fromkeys([*(a or []), *(b or [])])),
        capture=capture,
    )
    durable = foldwise.DurableContextMiddleware(channels=[pins], merge_contract=merge_contract)
    model = ScriptedChatModel(
        default="fine", input_token_counter=lambda ms: sum(len(str(m.content)) // 4 for m in ms)
    )
    summarization = foldwise.SummarizationMiddleware(
        config=parse_config(
            {
                "summarization": {
                    "model_name": "extractive",
                    "trigger": {"type": "tokens", "value": 10**6},
                    "keep": {"type": "messages", "value": 2},
                    "min_gain_tokens": 0,
                    "preserve_human": {"mode": "latest"},
                }
            }
        ),
        model=model,
        durable=durable,
    )
    agent = lc_create_agent(
        model,
        middleware=[durable, summarization],
        system_prompt="You are careful.",
        checkpointer=InMemorySaver(),
        state_schema=foldwise.FoldwiseState,
    )
    return agent, model


@pytest.mark.parametrize("merge_contract", [False, True])
@pytest.mark.parametrize("use_async", [False, True])
def test_the_overflow_retry_keeps_custom_channels_and_one_contract(
    merge_contract: bool, use_async: bool
) -> None:
    agent, model = _pinned_agent(merge_contract)
    big = "word " * 400
    inputs = [
        "PIN: never touch the billing table",
        *(f"{i} {big}" for i in range(3)),
        "final question",
    ]

    async def arun() -> None:
        for i, text in enumerate(inputs):
            model.context_window = 900 if i == len(inputs) - 1 else None
            await agent.ainvoke({"messages": [HumanMessage(text)]}, THREAD)

    if use_async:
        asyncio.run(arun(), debug=True)
    else:
        for i, text in enumerate(inputs):
            model.context_window = 900 if i == len(inputs) - 1 else None
            agent.invoke({"messages": [HumanMessage(text)]}, THREAD)
    state = agent.get_state(THREAD).values
    assert state["compactions"][-1]["trigger"] == "overflow"
    retry = model.requests[-1].messages
    systems = [m for m in retry if isinstance(m, SystemMessage)]
    contracts = [m for m in systems if AUTHORITY_CONTRACT in m.text]
    assert len(contracts) == 1
    assert len(systems) == (1 if merge_contract else 2)
    data = [m for m in retry if is_durable_data_message(m)]
    assert len(data) == 1
    assert "never touch the billing table" in str(data[0].content)
    assert "Conversation summary" in str(data[0].content)


def test_user_input_that_no_longer_fits_is_stored_verbatim_not_refused(tmp_path: Any) -> None:
    """preserve_human all: older pasted input beyond the budget is stored, never refused."""
    estimate = get_counter()
    model = ScriptedChatModel(
        default="noted",
        context_window=16_000,
        input_token_counter=lambda ms: estimate.count_messages(ms, anchor=False) + 600,
    )
    model.profile = {"max_input_tokens": 16_000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "reserved_output_tokens": 1000,
                "min_gain_tokens": 0,
                "trigger": {"type": "tokens", "value": 10**6},
                "preserve_human": {"mode": "all", "max_tokens": 20_000},
            },
            "offload": {"root": str(tmp_path), "human_token_limit": 10**6},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    pastes = [f"document {i}:\n" + f"clause {i}.7 of the supply contract. " * 420 for i in range(6)]
    for paste in pastes:
        agent.invoke({"messages": [HumanMessage(paste)]}, THREAD)
    state = agent.get_state(THREAD).values
    humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
    stored = [m for m in humans if m.additional_kwargs.get(OFFLOAD_FLAG)]
    assert stored and str(humans[-1].content) == pastes[-1]
    # Every paste is in view, or stored verbatim (directly, or inside a compaction archive).
    store = FilesystemArtifactStore(tmp_path)
    texts = [store.get("t-overflow", ref["artifact_id"]) for ref in state["offloads"]]
    in_view = [str(m.content) for m in humans]
    assert all(p in in_view or p in texts or any(p in t for t in texts) for p in pastes)


def test_many_medium_user_messages_never_kill_the_thread(tmp_path: Any) -> None:
    """preserve_human all (the default): user messages too small to store behind a preview are
    summarized once they no longer fit (the archive keeps them verbatim) instead of being kept
    in requests the provider refuses, turn after turn."""
    estimate = get_counter()
    model = ScriptedChatModel(
        default=lambda ms: AIMessage("ok " * 50),
        usage=True,
        context_window=8000,
        input_token_counter=lambda ms: estimate.count_messages(ms, anchor=False),
    )
    model.profile = {"max_input_tokens": 8000}
    config = parse_config(
        {
            "summarization": {
                "model_name": "extractive",
                "reserved_output_tokens": 500,
                "keep": {"type": "messages", "value": 4},
            },
            "offload": {"root": str(tmp_path)},
        }
    )
    agent = foldwise.create_agent(config, model=model, checkpointer=InMemorySaver())
    questions = [
        f"question {turn} " + " ".join(f"w{turn}x{i}" for i in range(150)) for turn in range(30)
    ]
    for question in [*questions, "hi", "hi again"]:
        agent.invoke({"messages": [HumanMessage(question)]}, THREAD)
    state = agent.get_state(THREAD).values
    assert state["messages"][-1].content == "ok " * 50
    # Every question is still in view or in a compaction archive, verbatim.
    store = FilesystemArtifactStore(tmp_path)
    archived = "".join(
        store.get("t-overflow", ref["artifact_id"])
        for ref in state["offloads"]
        if ref["kind"] == "archive"
    )
    in_view = "".join(str(m.content) for m in state["messages"])
    assert all(q in archived or q in in_view for q in questions)
