"""Background pre-summarization: hits commit the precomputed summary, anything stale never does."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, ClassVar

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

import foldwise
from foldwise._local_model import LocalChatModel, one_generation
from foldwise._steps import run_async, run_sync
from foldwise.compaction import (
    CompactionPolicy,
    CompactionReceipt,
    Compactor,
    Presummaries,
    decide_compaction,
)
from foldwise.compaction._presummary import PresummaryEntry
from foldwise.config import ContextSize, parse_config
from foldwise.errors import ConfigError
from foldwise.models import ModelRegistry
from foldwise.tokens import get_counter

THREAD = {"configurable": {"thread_id": "t1"}}


class GatedSummarizer(LocalChatModel):
    """An async-only summarizer double: records prompts; calls wait while `gate` is set."""

    llm_type: ClassVar[str] = "test-gated-summarizer"
    prompts: list[str] = Field(default_factory=list)
    fail_calls: set[int] = Field(default_factory=set)
    reply: str | None = None
    gate: Any = None

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        raise AssertionError("a blocking summarizer call in an async run")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(str(messages[0].content))
        number = len(self.prompts)
        if self.gate is not None:
            await self.gate.wait()
        if number in self.fail_calls:
            raise RuntimeError(f"summarizer call {number} failed")
        return one_generation(AIMessage(content=self.reply or f"SUMMARY-{number}"))


class MainModel(LocalChatModel):
    """The run model: answers every turn; refuses to summarize unless `summarizes`."""

    llm_type: ClassVar[str] = "test-main"
    summarizes: bool = False

    def _answer(self, messages: list[BaseMessage], options: dict[str, Any]) -> BaseMessage:
        if "<new_messages>" in str(messages[0].content) and not self.summarizes:
            raise RuntimeError("the run model is not a summarizer here")
        return AIMessage(content="answer")


def make_agent(
    summarizer: GatedSummarizer,
    *,
    presummarize_at: float | None = 0.5,
    run_model_summarizes: bool = False,
    **summarization: Any,
) -> tuple[Any, foldwise.SummarizationMiddleware]:
    settings: dict[str, Any] = {
        "model_name": "summ",
        "trigger": {"type": "messages", "value": 12},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "latest"},
        "presummarize_at": presummarize_at,
    }
    settings.update(summarization)
    config = parse_config(
        {
            "models": [
                {"name": "main", "use": "foldwise.testing:ScriptedChatModel"},
                {"name": "summ", "use": "foldwise.testing:ScriptedChatModel"},
            ],
            "summarization": settings,
        }
    )
    main = MainModel(summarizes=run_model_summarizes)
    registry = ModelRegistry(config, overrides={"main": main, "summ": summarizer})
    middleware = foldwise.SummarizationMiddleware(
        config=config, model=main, run_model_name="main", registry=registry
    )
    agent = create_agent(
        main,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        state_schema=foldwise.FoldwiseState,
    )
    return agent, middleware


def store_of(middleware: foldwise.SummarizationMiddleware) -> Presummaries:
    store = middleware.compactor.presummaries
    assert store is not None
    return store


async def turn(agent: Any, text: str) -> dict[str, Any]:
    await agent.ainvoke({"messages": [HumanMessage(text)]}, THREAD)
    return dict((await agent.aget_state(THREAD)).values)


async def turns_until_started(agent: Any, middleware: Any) -> dict[str, Any]:
    """Turns until a background summary has started; returns the state after that turn."""
    for i in range(8):
        state = await turn(agent, f"question {i}")
        if store_of(middleware).get("t1") is not None:
            assert not state.get("compactions")
            return state
    raise AssertionError("no background summary started")


async def turns_until_compacted(agent: Any, start: int = 100) -> dict[str, Any]:
    for i in range(start, start + 8):
        state = await turn(agent, f"question {i}")
        if state.get("compactions"):
            return state
    raise AssertionError("no compaction")


def span_of(prompt: str) -> str:
    return prompt.split("<new_messages>", 1)[1].split("</new_messages>", 1)[0]


async def _agent_with_finished_background() -> tuple[GatedSummarizer, Any, Any, PresummaryEntry]:
    """An agent whose thread has a finished background summary and no compaction yet."""
    summarizer = GatedSummarizer()
    agent, middleware = make_agent(summarizer)
    await turns_until_started(agent, middleware)
    entry = store_of(middleware).get("t1")
    assert entry is not None
    await asyncio.wait_for(asyncio.shield(entry.task), 5)
    return summarizer, agent, middleware, entry


# -- hit path ----------------------------------------------------------------------------------


async def test_hit_commits_the_precomputed_summary_with_a_receipt_marked_precomputed() -> None:
    summarizer, agent, middleware, entry = await _agent_with_finished_background()
    assert len(summarizer.prompts) == 1
    state = await turns_until_compacted(agent)
    receipt = state["compactions"][-1]
    assert receipt["precomputed"] is True
    assert receipt["model_used"] == "summ"
    assert state["summary_text"] == "SUMMARY-1"
    assert len(summarizer.prompts) == 1  # the compaction made no call of its own
    # What was removed is exactly the span the background call summarized.
    kept = {str(m.id) for m in state["messages"]}
    span = span_of(summarizer.prompts[0])
    assert "question 0" in span and "question 0" not in " ".join(
        str(m.content) for m in state["messages"]
    )
    assert receipt["messages_removed"] == entry.cut - receipt["messages_rescued"]
    assert entry.last_id not in kept
    assert len(store_of(middleware)) == 0 and store_of(middleware).running == 0


async def test_task_in_flight_is_awaited_not_started_again() -> None:
    gate = asyncio.Event()
    summarizer = GatedSummarizer(gate=gate)
    agent, middleware = make_agent(summarizer)
    state = await turns_until_started(agent, middleware)
    i = 0
    while len(state["messages"]) + 1 < 12:  # the next turn's request reaches the trigger
        state = await turn(agent, f"more {i}")
        i += 1
    firing = asyncio.ensure_future(turn(agent, "the compacting turn"))
    done, _ = await asyncio.wait({firing}, timeout=0.3)
    assert not done, "the compacting turn did not wait for the background summary"
    assert len(summarizer.prompts) == 1
    gate.set()
    state = await asyncio.wait_for(firing, 5)
    assert state["compactions"][-1]["precomputed"] is True
    assert state["summary_text"] == "SUMMARY-1"
    assert len(summarizer.prompts) == 1


@pytest.mark.parametrize("presummarize_at", [None, 0.5])
async def test_hit_is_validated_like_a_fresh_summary(presummarize_at: float | None) -> None:
    # A "summary" longer than what it replaces fails validation, whoever asked for it: the
    # next candidate (the run model) answers, in the background as synchronously.
    summarizer = GatedSummarizer(reply="x " * 4000)
    agent, _middleware = make_agent(
        summarizer, presummarize_at=presummarize_at, run_model_summarizes=True
    )
    for i in range(8):
        state = await turn(agent, f"question {i}")
        await asyncio.sleep(0.05)
        if state.get("compactions"):
            break
    receipt = state["compactions"][-1]
    assert receipt["precomputed"] is (presummarize_at is not None)
    assert receipt["model_used"] == "main"
    attempts = [(a["model"], a["ok"]) for a in receipt["attempts"]]
    assert attempts == [("summ", False), ("main", True)]
    assert "not smaller than what it replaces" in receipt["attempts"][0]["error"]
    assert state["summary_text"] == "answer"


async def test_background_failure_falls_back_to_the_synchronous_path() -> None:
    summarizer = GatedSummarizer(fail_calls={1})
    agent, middleware = make_agent(summarizer)
    await turns_until_started(agent, middleware)
    entry = store_of(middleware).get("t1")
    assert entry is not None
    assert await asyncio.wait_for(asyncio.shield(entry.task), 5) is None
    state = await turns_until_compacted(agent)
    receipt = state["compactions"][-1]
    assert receipt["precomputed"] is False
    assert state["summary_text"] == "SUMMARY-2"
    assert [a["model"] for a in receipt["attempts"]] == ["summ"]
    assert len(summarizer.prompts) == 2


# -- stale spans are never committed -----------------------------------------------------------


async def _stale_after(update: Any) -> tuple[dict[str, Any], str]:
    """Start a background summary, change the state, compact; the committed summary's prompt."""
    summarizer, agent, _middleware, _entry = await _agent_with_finished_background()
    values = (await agent.aget_state(THREAD)).values
    await agent.aupdate_state(THREAD, update(values), as_node="model")
    state = await turns_until_compacted(agent)
    # The stale summary (call 1) is never the one committed; the committed one's prompt shows
    # the state as changed (a fresh background summary, or one made at compaction time).
    assert state["summary_text"] != "SUMMARY-1"
    assert state["summary_text"] in {f"SUMMARY-{n}" for n in range(2, 10)}
    number = int(state["summary_text"].removeprefix("SUMMARY-"))
    return state, summarizer.prompts[number - 1]


async def test_stale_when_a_summarized_message_was_edited() -> None:
    def edit(values: dict[str, Any]) -> dict[str, Any]:
        first = values["messages"][0]
        return {"messages": [HumanMessage(id=first.id, content="edited question")]}

    state, prompt = await _stale_after(edit)
    # Same ids: only the fingerprint at compaction time tells, and it is summarized then.
    assert state["compactions"][-1]["precomputed"] is False
    assert "edited question" in span_of(prompt)


async def test_stale_when_a_summarized_message_was_removed() -> None:
    removed: list[str] = []

    def remove(values: dict[str, Any]) -> dict[str, Any]:
        removed.append(str(values["messages"][2].content))
        return {"messages": [RemoveMessage(id=str(values["messages"][2].id))]}

    _state, prompt = await _stale_after(remove)
    assert removed[0] not in span_of(prompt)


async def test_stale_when_the_prior_summary_changed() -> None:
    _state, prompt = await _stale_after(lambda _values: {"summary_text": "an older summary"})
    assert "an older summary" in prompt


async def test_stale_when_a_message_was_inserted_into_the_span() -> None:
    def insert(values: dict[str, Any]) -> dict[str, Any]:
        messages = list(values["messages"])
        extra = HumanMessage(id="inserted", content="inserted early")
        return {
            "messages": [
                RemoveMessage(id="__remove_all__"),
                messages[0],
                extra,
                *messages[1:],
            ]
        }

    _state, prompt = await _stale_after(insert)
    assert "inserted early" in span_of(prompt)


# -- engine level: keep, appended growth, settings ---------------------------------------------


def _history(n: int, size: int = 40) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(n):
        messages.append(HumanMessage(id=f"h{i}", content=f"question {i} " + "word " * size))
        messages.append(AIMessage(id=f"a{i}", content=f"answer {i} " + "word " * size))
    return messages


def _compactor(summarizer: GatedSummarizer, policy: CompactionPolicy) -> Compactor:
    return Compactor(
        policy=policy,
        resolve=lambda _name: summarizer,
        counter=get_counter(),
        run_model="summ",
        fallback=None,
        presummaries=Presummaries(),
    )


def _policy(**changes: Any) -> CompactionPolicy:
    base = CompactionPolicy.from_summarization(
        parse_config(
            {
                "summarization": {
                    "trigger": {"type": "tokens", "value": 2000},
                    "keep": {"type": "messages", "value": 2},
                    "min_gain_tokens": 0,
                    "presummarize_at": 0.5,
                }
            }
        ).summarization
    )
    return dataclasses.replace(base, **changes)


async def _start(compactor: Compactor, messages: list[BaseMessage], **options: Any) -> None:
    await run_async(compactor.presummarize_steps(messages, None, thread_id="t", **options))
    store = compactor.presummaries
    assert store is not None
    entry = store.get("t")
    assert entry is not None
    await asyncio.wait_for(asyncio.shield(entry.task), 5)


async def _started() -> tuple[GatedSummarizer, Compactor, list[BaseMessage]]:
    """A compactor whose background summary of an 8-turn history has finished."""
    summarizer = GatedSummarizer()
    compactor = _compactor(summarizer, _policy())
    messages = _history(8)
    await _start(compactor, messages)
    return summarizer, compactor, messages


async def test_appended_messages_keep_the_precomputed_cut() -> None:
    summarizer, compactor, messages = await _started()
    grown = [*messages, *_history(12)[16:]]
    outcome = await run_async(compactor.compact_steps(grown, None, thread_id="t", force=True))
    assert outcome.receipt is not None and outcome.receipt.precomputed
    assert [m.id for m in outcome.plan.summary_input] == [m.id for m in messages[:-2]]
    assert len(summarizer.prompts) == 1


async def test_appended_past_the_post_compaction_target_is_a_miss() -> None:
    summarizer, compactor, messages = await _started()
    # So much was added since that keeping it all would leave the request over half the
    # trigger: the planner's own cut is used and summarized now.
    grown = [*messages, *_history(16, size=60)[16:]]
    outcome = await run_async(compactor.compact_steps(grown, None, thread_id="t", force=True))
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert len(outcome.plan.to_summarize) > len(messages) - 2
    assert len(summarizer.prompts) == 2


async def test_a_larger_keep_is_a_miss() -> None:
    summarizer, compactor, messages = await _started()
    grown = [*messages, *_history(10)[16:]]
    keep_more = _policy(keep=ContextSize(type="messages", value=8))
    outcome = await run_async(
        compactor.compact_steps(grown, None, thread_id="t", policy=keep_more, force=True)
    )
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert [m.id for m in outcome.plan.preserved][-8:] == [m.id for m in grown[-8:]]
    assert len(summarizer.prompts) == 2


async def test_a_changed_prior_summary_is_a_miss_at_compaction_time() -> None:
    summarizer, compactor, messages = await _started()
    outcome = await run_async(
        compactor.compact_steps(messages, "a summary from elsewhere", thread_id="t", force=True)
    )
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert outcome.summary_text == "SUMMARY-2"
    assert "a summary from elsewhere" in summarizer.prompts[-1]


async def test_changed_summarizer_settings_are_a_miss() -> None:
    summarizer, compactor, messages = await _started()
    other_prompt = _policy(summary_prompt="Summarize tersely:\n{messages}")
    outcome = await run_async(
        compactor.compact_steps(messages, None, thread_id="t", policy=other_prompt, force=True)
    )
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert summarizer.prompts[-1].startswith("Summarize tersely:")


async def test_manual_compaction_never_takes_a_background_summary() -> None:
    summarizer, compactor, messages = await _started()
    outcome = await run_async(
        compactor.compact_steps(messages, None, thread_id="t", force=True, manual=True)
    )
    assert outcome.receipt is not None and not outcome.receipt.precomputed
    assert len(summarizer.prompts) == 2


def test_the_sync_driver_never_starts_or_takes_a_background_summary() -> None:
    summarizer = GatedSummarizer()
    compactor = _compactor(summarizer, _policy())
    messages = _history(8)
    run_sync(compactor.presummarize_steps(messages, None, thread_id="t"))
    assert compactor.presummaries is not None and len(compactor.presummaries) == 0


# -- the planner's preferred cut ---------------------------------------------------------------


def test_planner_takes_a_valid_preferred_cut_and_refuses_invalid_ones() -> None:
    policy = _policy()
    messages = _history(10)
    normal = decide_compaction(messages, policy=policy, force=True).plan
    assert normal is not None and normal.cutoff == len(messages) - 2
    earlier = decide_compaction(messages, policy=policy, force=True, prefer_cut=6).plan
    assert earlier is not None and earlier.cutoff == 6
    # Keeping fewer than `keep` asks is never preferred.
    later = decide_compaction(messages, policy=policy, force=True, prefer_cut=19).plan
    assert later is not None and later.cutoff == normal.cutoff
    calls = [
        *messages[:5],
        AIMessage(id="call", content="", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        foldwise_tool_result("c1"),
        *messages[5:],
    ]
    split = decide_compaction(calls, policy=policy, force=True, prefer_cut=6).plan
    assert split is not None and split.cutoff != 6  # between a call and its result


def foldwise_tool_result(call_id: str) -> BaseMessage:
    from langchain_core.messages import ToolMessage

    return ToolMessage(id=f"r-{call_id}", content="result", tool_call_id=call_id)


# -- lifecycle: nothing pending, bounded, the sync path, streams --------------------------------


async def test_lru_eviction_and_aclose_leave_nothing_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asyncio.get_running_loop().set_debug(True)
    gate = asyncio.Event()
    summarizer = GatedSummarizer(gate=gate)
    compactor = _compactor(summarizer, _policy())
    compactor.presummaries = Presummaries(maxsize=1)
    messages = _history(8)
    await run_async(compactor.presummarize_steps(messages, None, thread_id="a"))
    first = compactor.presummaries.get("a")
    await run_async(compactor.presummarize_steps(messages, None, thread_id="b"))
    assert first is not None
    await asyncio.sleep(0)
    assert first.task.cancelled() or first.task.done()
    assert compactor.presummaries.get("a") is None and compactor.presummaries.running == 1
    await compactor.presummaries.aclose()
    assert compactor.presummaries.running == 0 and len(compactor.presummaries) == 0
    pending = [t for t in asyncio.all_tasks() if t.get_name().startswith("foldwise-presummary")]
    assert pending == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_middleware_aclose_cancels_in_flight_summaries() -> None:
    gate = asyncio.Event()
    summarizer = GatedSummarizer(gate=gate)
    agent, middleware = make_agent(summarizer)
    await turns_until_started(agent, middleware)
    entry = store_of(middleware).get("t1")
    assert entry is not None and not entry.task.done()
    await middleware.aclose()
    assert entry.task.cancelled()
    assert store_of(middleware).running == 0


def test_sync_runs_compact_as_before() -> None:
    summarizer = GatedSummarizer()
    agent, middleware = make_agent(summarizer, model_name=None)
    for i in range(8):
        agent.invoke({"messages": [HumanMessage(f"question {i}")]}, THREAD)
    state = agent.get_state(THREAD).values
    assert len(store_of(middleware)) == 0
    assert state["compactions"] and not state["compactions"][-1]["precomputed"]


async def test_background_tokens_never_reach_a_stream() -> None:
    summarizer = GatedSummarizer(reply="SECRET SUMMARY TEXT")
    agent, middleware = make_agent(summarizer)
    seen: list[str] = []
    for i in range(8):
        async for chunk, _meta in agent.astream(
            {"messages": [HumanMessage(f"question {i}")]}, THREAD, stream_mode="messages"
        ):
            seen.append(str(getattr(chunk, "content", "")))
        entry = store_of(middleware).get("t1")
        if entry is not None:
            await asyncio.wait_for(asyncio.shield(entry.task), 5)
    assert summarizer.prompts  # the background summarizer did run
    assert not any("SECRET" in text for text in seen)


async def test_disabled_by_default_and_by_zero() -> None:
    for value in (None, 0):
        _agent, middleware = make_agent(GatedSummarizer(), presummarize_at=value)
        assert middleware.compactor.presummaries is None


# -- configuration and receipts ----------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 1.0, 1.5, -0.2, "often", True])
def test_presummarize_at_outside_the_open_interval_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"summarization\.presummarize_at"):
        parse_config({"summarization": {"presummarize_at": value}})


def test_presummarize_at_accepts_a_share_and_zero_disables() -> None:
    assert parse_config({"summarization": {"presummarize_at": 0.8}}).summarization.presummarize_at
    assert parse_config({"summarization": {"presummarize_at": "0.75"}}).summarization == (
        parse_config({"summarization": {"presummarize_at": 0.75}}).summarization
    )
    zero = parse_config({"summarization": {"presummarize_at": 0}})
    assert zero.summarization.presummarize_at is None


def test_receipts_written_before_the_field_read_as_not_precomputed() -> None:
    old = {
        "id": "cmp_1",
        "trigger": "tokens",
        "reason": "tokens >= 10",
        "tokens_before": 20,
        "tokens_after": 5,
        "messages_removed": 3,
        "messages_preserved": 2,
        "messages_rescued": 0,
        "summary_chars": 10,
        "model_used": "m",
    }
    receipt = CompactionReceipt.model_validate(old)
    assert receipt.precomputed is False
    assert "precomputed=false" in receipt.log_line()


def test_a_task_lost_with_its_event_loop_is_replaced_on_the_next_loop() -> None:
    summarizer = GatedSummarizer()
    compactor = _compactor(summarizer, _policy())
    store = compactor.presummaries
    assert store is not None
    messages = _history(8)

    async def start(gate: asyncio.Event | None) -> None:
        summarizer.gate = gate
        await run_async(compactor.presummarize_steps(messages, None, thread_id="t"))

    asyncio.run(start(asyncio.Event()))  # the loop closes with the task pending: cancelled
    first = store.get("t")
    assert first is not None and first.task.cancelled()

    async def next_turn() -> CompactionReceipt | None:
        await start(None)
        entry = store.get("t")
        assert entry is not None and entry is not first
        await asyncio.wait_for(asyncio.shield(entry.task), 5)
        outcome = await run_async(
            compactor.compact_steps(messages, None, thread_id="t", force=True)
        )
        return outcome.receipt

    receipt = asyncio.run(next_turn())
    assert receipt is not None and receipt.precomputed
