"""The pure planner: triggers, cutoff, pairing, rescue, verbatim human input, budget."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from foldwise.compaction import CompactionPolicy, SkipReason, decide_compaction, plan_compaction
from foldwise.compaction._policy import Threshold
from foldwise.config import ContextSize, parse_config
from foldwise.errors import MessageFormatError
from tests._factories import LenCounter, ai, human, reminder, tool

COUNTER = LenCounter()


def policy(
    trigger: tuple[str, int] | None = ("messages", 4),
    keep: tuple[str, float] = ("messages", 2),
    **kwargs: object,
) -> CompactionPolicy:
    triggers = ()
    if trigger is not None:
        kind, value = trigger
        triggers = (Threshold(kind, value, ContextSize(type=kind, value=value)),)  # type: ignore[arg-type]
    base: dict[str, object] = {"min_gain_tokens": 0, "preserve_human": "latest"}
    base.update(kwargs)
    return CompactionPolicy(
        triggers=triggers,
        keep=ContextSize(type=keep[0], value=keep[1]),
        **base,  # type: ignore[arg-type]
    )


def ids(messages: tuple[BaseMessage, ...] | list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def test_below_threshold_plans_nothing() -> None:
    msgs = [human("a"), ai("b"), human("c")]
    decision = decide_compaction(msgs, policy=policy(), counter=COUNTER)
    assert decision.plan is None
    assert decision.skip_reason is SkipReason.BELOW_THRESHOLD


def test_messages_trigger_keeps_the_last_two() -> None:
    msgs = [human("first"), ai("one"), human("second"), ai("two")]
    plan = plan_compaction(msgs, policy=policy(), counter=COUNTER)
    assert plan is not None
    # The latest real user message is rescued by id, never by moving the cut.
    assert ids(plan.to_summarize) == [msgs[0].id, msgs[1].id]
    assert ids(plan.preserved) == [msgs[2].id, msgs[3].id]
    assert plan.trigger == "messages"
    assert "measured 4 messages" in plan.reason


def test_summary_counts_one_message_toward_the_trigger() -> None:
    msgs = [human("a"), ai("b"), human("c")]
    assert plan_compaction(msgs, policy=policy(), counter=COUNTER) is None
    assert plan_compaction(msgs, policy=policy(), counter=COUNTER, summary_text="old") is not None


def test_summary_tokens_count_toward_the_token_trigger() -> None:
    msgs = [human("a" * 10), ai("b" * 10), human("c" * 10)]
    pol = policy(trigger=("tokens", 100), keep=("messages", 1))
    assert plan_compaction(msgs, policy=pol, counter=COUNTER) is None
    assert plan_compaction(msgs, policy=pol, counter=COUNTER, summary_text="s" * 80) is not None


def test_static_tokens_count_toward_the_trigger() -> None:
    msgs = [human("a" * 10), ai("b" * 10), human("c" * 10)]
    pol = policy(trigger=("tokens", 100), keep=("messages", 1))
    assert plan_compaction(msgs, policy=pol, counter=COUNTER, static_tokens=80) is not None


def test_force_ignores_the_threshold() -> None:
    msgs = [human(str(i)) if i % 2 == 0 else ai(str(i)) for i in range(6)]
    plan = plan_compaction(
        msgs, policy=policy(trigger=("messages", 100)), counter=COUNTER, force=True
    )
    assert plan is not None
    assert plan.trigger == "manual"
    assert len(plan.preserved) == 2


def test_keep_covering_everything_is_not_enough_messages() -> None:
    msgs = [human("a"), ai("b"), human("c"), ai("d")]
    decision = decide_compaction(msgs, policy=policy(keep=("messages", 10)), counter=COUNTER)
    assert decision.skip_reason is SkipReason.NOT_ENOUGH_MESSAGES


def test_cut_on_a_tool_result_moves_back_to_its_call() -> None:
    msgs = [
        human("go"),
        ai("", ("c1", "search", {"q": "x"})),
        tool("c1", "result"),
        ai("done"),
        human("next"),
    ]
    plan = plan_compaction(msgs, policy=policy(keep=("messages", 3)), counter=COUNTER)
    assert plan is not None
    assert msgs[1] in plan.preserved and msgs[2] in plan.preserved


def test_parallel_calls_stay_together() -> None:
    call = ai("", ("p1", "a", {}), ("p2", "b", {}), ("p3", "c", {}))
    msgs = [
        human("q"),
        ai("x"),
        human("q2"),
        call,
        tool("p1", "1"),
        tool("p2", "2"),
        tool("p3", "3"),
        ai("end"),
    ]
    plan = plan_compaction(msgs, policy=policy(keep=("messages", 3)), counter=COUNTER)
    assert plan is not None
    kept = ids(plan.preserved)
    assert call.id in kept
    assert all(m.id in kept for m in msgs[4:7])


def test_orphan_tool_results_are_never_kept() -> None:
    orphan = tool("ghost", "no call made this")
    msgs = [human("a"), ai("b"), human("c"), orphan, ai("d")]
    plan = plan_compaction(msgs, policy=policy(keep=("messages", 2)), counter=COUNTER)
    assert plan is not None
    assert orphan not in plan.preserved
    assert orphan in plan.to_summarize


def test_pending_call_at_the_end_stays_with_its_message() -> None:
    pending = ai("", ("later", "search", {}))
    msgs = [human("a"), ai("b"), human("c"), ai("d"), human("e"), pending]
    plan = plan_compaction(
        msgs, policy=policy(keep=("messages", 0.0 + 1)), counter=COUNTER, force=True
    )
    assert plan is not None
    assert plan.preserved[-1] is pending


def test_reminder_and_latest_request_are_rescued_in_order() -> None:
    rem = reminder("today is Monday")
    stale = human("old question")
    current = human("current question")
    msgs = [rem, stale, ai("old answer"), current, *[ai(f"step {i}") for i in range(6)]]
    plan = plan_compaction(msgs, policy=policy(keep=("messages", 2)), counter=COUNTER)
    assert plan is not None
    assert ids(plan.preserved[:2]) == [rem.id, current.id]
    assert stale in plan.to_summarize
    assert set(plan.rescued_ids) == {rem.id, current.id}


def test_first_turn_long_analysis_keeps_the_request() -> None:
    request = human("analyse the repository")
    msgs: list[BaseMessage] = [reminder("date"), request]
    for i in range(12):
        msgs += [ai("", (f"c{i}", "read_file", {"path": f"/f{i}"})), tool(f"c{i}", f"content {i}")]
    plan = plan_compaction(msgs, policy=policy(keep=("messages", 10)), counter=COUNTER)
    assert plan is not None
    assert request in plan.preserved
    assert msgs[2] in plan.to_summarize  # the first AI call is compressed


def test_preserve_human_all_keeps_every_user_message_verbatim() -> None:
    h1, h2, h3 = human("spec: must use Postgres"), human("also no ORMs"), human("now write it")
    msgs = [h1, ai("ok"), h2, ai("noted"), h3, ai("a"), ai("b"), ai("c")]
    plan = plan_compaction(
        msgs, policy=policy(keep=("messages", 2), preserve_human="all"), counter=COUNTER
    )
    assert plan is not None
    assert ids(plan.preserved) == [h1.id, h2.id, h3.id, msgs[-2].id, msgs[-1].id]
    assert all(m.type != "human" for m in plan.to_summarize)
    assert h1 in plan.summary_input  # the summarizer still sees them as context


def test_preserve_human_none_summarizes_user_messages() -> None:
    h1 = human("first")
    msgs = [h1, ai("ok"), human("second"), ai("a"), ai("b")]
    plan = plan_compaction(
        msgs, policy=policy(keep=("messages", 2), preserve_human="none"), counter=COUNTER
    )
    assert plan is not None
    assert h1 in plan.to_summarize


def test_preserve_human_over_budget_marks_oldest_for_offload() -> None:
    big1, big2, last = human("x" * 500), human("y" * 500), human("z")
    msgs = [big1, ai("a"), big2, ai("b"), last, ai("c"), ai("d")]
    pol = policy(keep=("messages", 2), preserve_human="all", preserve_human_max_tokens=600)
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert plan.human_overflow_ids == (big1.id,)
    assert big1 in plan.preserved  # still verbatim until a store replaces it


def test_over_budget_dense_user_input_whose_preview_is_no_smaller_is_summarized() -> None:
    # One token a character: a 4,000-character preview costs 4,000+ tokens, so a 3,000-token
    # message gains nothing behind one (it used to be kept, assumed to shrink to 1,500 tokens);
    # a 6,000-token one still does.
    medium, large, last = human("m" * 3000), human("l" * 6000), human("now")
    msgs = [medium, ai("a"), large, ai("b"), last, ai("c"), ai("d")]
    pol = policy(
        trigger=None,
        keep=("messages", 2),
        preserve_human="all",
        context_window=6000,
        reserved_output_tokens=0,
        summary_max_tokens=256,
    )
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert medium in plan.to_summarize
    assert large in plan.preserved
    assert plan.human_overflow_ids == (large.id,)


def test_everything_rescued_leaves_the_summary_alone() -> None:
    msgs = [reminder("date"), human("only request")]
    decision = decide_compaction(
        msgs,
        policy=policy(keep=("messages", 1)),
        counter=COUNTER,
        force=True,
        summary_text="keep me",
    )
    assert decision.plan is None
    assert decision.skip_reason is SkipReason.EVERYTHING_RESCUED


def test_budget_invariant_forces_compaction_without_a_trigger() -> None:
    msgs = [
        human("q"),
        *[
            tool_pair
            for i in range(5)
            for tool_pair in (ai("", (f"k{i}", "search", {})), tool(f"k{i}", "r" * 2000))
        ],
        ai("done"),
    ]
    pol = policy(
        trigger=None, keep=("messages", 20), context_window=9000, reserved_output_tokens=1000
    )
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert plan.trigger == "budget"
    kept = sum(COUNTER.count_message(m) for m in plan.preserved)
    assert kept + 2000 <= 8000  # the tail leaves room for the summary inside the budget


def test_fraction_trigger_resolves_against_the_window() -> None:
    config = parse_config(
        {
            "models": [{"name": "m", "use": "x.y:Z", "context_window": 1000}],
            "summarization": {
                "trigger": [{"type": "fraction", "value": 0.5}],
                "reserved_output_tokens": 100,
            },
        }
    )
    pol = CompactionPolicy.from_config(config)
    assert pol.triggers[0].limit == 500


def test_fraction_clauses_are_dropped_without_a_window(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config(
        {
            "summarization": {
                "trigger": [{"type": "fraction", "value": 0.8}, {"type": "tokens", "value": 900}],
                "keep": {"type": "fraction", "value": 0.3},
            }
        }
    )
    pol = CompactionPolicy.from_config(config)
    assert [t.kind for t in pol.triggers] == ["tokens"]
    assert pol.keep.type == "messages"
    assert "fraction" in caplog.text


def test_small_gain_is_skipped() -> None:
    msgs = [human("a"), ai("b"), human("c"), ai("d"), human("e")]
    decision = decide_compaction(msgs, policy=policy(min_gain_tokens=10_000), counter=COUNTER)
    assert decision.skip_reason is SkipReason.GAIN_TOO_SMALL


def test_keep_by_tokens() -> None:
    msgs = [human("a" * 50), ai("b" * 50), human("c" * 50), ai("d" * 50), ai("e" * 10)]
    plan = plan_compaction(msgs, policy=policy(keep=("tokens", 70)), counter=COUNTER, force=True)
    assert plan is not None
    assert ids(plan.preserved) == [msgs[2].id, msgs[3].id, msgs[4].id]


@pytest.mark.parametrize(
    ("bad", "index", "field"),
    [
        (ToolMessage(content="x", tool_call_id=""), 1, "tool_call_id"),
        ("not a message", 1, None),
    ],
)
def test_malformed_messages_name_their_index(bad: object, index: int, field: str | None) -> None:
    msgs = [human("a"), bad, ai("b")]
    with pytest.raises(MessageFormatError) as err:
        plan_compaction(msgs, policy=policy(), counter=COUNTER, force=True)  # type: ignore[arg-type]
    assert err.value.index == index
    assert f"message {index}" in str(err.value)
    assert len(msgs) == 3


def test_planner_does_not_mutate_its_input() -> None:
    msgs = [human("a"), ai("b"), human("c"), ai("d"), human("e")]
    before = [m.model_dump() for m in msgs]
    plan_compaction(msgs, policy=policy(), counter=COUNTER)
    assert [m.model_dump() for m in msgs] == before


# -- property: tool-call pairing is never broken ---------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = [human("start")]
    call_n = 0
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 30))):
        action = draw(st.sampled_from(["human", "ai", "calls", "results", "orphan"]))
        if action == "human":
            messages.append(human("u" * draw(st.integers(1, 40))))
        elif action == "ai":
            messages.append(ai("a" * draw(st.integers(1, 40))))
        elif action == "calls":
            n = draw(st.integers(1, 4))
            calls = []
            for _ in range(n):
                call_n += 1
                calls.append((f"c{call_n}", "tool", {}))
                pending.append(f"c{call_n}")
            messages.append(ai("", *calls))
        elif action == "results" and pending:
            draw_order = draw(st.permutations(pending))
            k = draw(st.integers(1, len(draw_order)))
            for cid in draw_order[:k]:
                messages.append(tool(cid, "r" * draw(st.integers(1, 60))))
                pending.remove(cid)
        elif action == "orphan":
            messages.append(tool(f"orphan{call_n}", "?"))
    return messages


def _check_pairing(preserved: tuple[BaseMessage, ...], original: list[BaseMessage]) -> None:
    kept_calls = {c["id"] for m in preserved if isinstance(m, AIMessage) for c in m.tool_calls}
    results_anywhere = {m.tool_call_id for m in original if isinstance(m, ToolMessage)}
    kept_results = {m.tool_call_id for m in preserved if isinstance(m, ToolMessage)}
    for m in preserved:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in kept_calls, "a kept tool result lost its call"
    for call_id in kept_calls & results_anywhere:
        assert call_id in kept_results, "a kept call lost its completed result"
    positions = {m.id: i for i, m in enumerate(preserved)}
    for m in preserved:
        if isinstance(m, ToolMessage):
            call_pos = next(
                positions[a.id]
                for a in preserved
                if isinstance(a, AIMessage) and any(c["id"] == m.tool_call_id for c in a.tool_calls)
            )
            assert call_pos < positions[m.id]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    keep=st.one_of(
        st.tuples(st.just("messages"), st.integers(1, 12)),
        st.tuples(st.just("tokens"), st.integers(1, 400)),
    ),
    mode=st.sampled_from(["all", "latest", "none"]),
    force=st.booleans(),
)
def test_pairing_is_never_broken(
    history: list[BaseMessage], keep: tuple[str, int], mode: str, force: bool
) -> None:
    pol = policy(trigger=("messages", 3), keep=keep, preserve_human=mode)
    plan = plan_compaction(history, policy=pol, counter=COUNTER, force=force)
    if plan is None:
        return
    _check_pairing(plan.preserved, history)
    everything = {m.id for m in plan.preserved} | {m.id for m in plan.to_summarize}
    assert everything == {m.id for m in history}, "a message was lost"
    assert not {m.id for m in plan.preserved} & {m.id for m in plan.to_summarize}
    assert plan.preserved, "compaction must keep at least one message"
    _check_protected(plan.preserved, history)


def _check_protected(preserved: tuple[BaseMessage, ...], history: list[BaseMessage]) -> None:
    """The current request and the newest tool exchange at the end are never summarized."""
    kept = {m.id for m in preserved}
    users = [m for m in history if m.type == "human"]
    if users:
        assert users[-1].id in kept, "the current request was summarized"
    start = len(history)
    while start > 0 and isinstance(history[start - 1], ToolMessage):
        start -= 1
    last = history[start - 1] if start > 0 else None
    if isinstance(last, AIMessage) and last.tool_calls:
        own = {c["id"] for c in last.tool_calls}
        assert last.id in kept, "the newest tool call was summarized"
        for m in history[start:]:
            if isinstance(m, ToolMessage) and m.tool_call_id in own:
                assert m.id in kept, "a result of the newest tool call was summarized"


def test_plan_compaction_takes_decide_compactions_arguments() -> None:
    import inspect

    from foldwise.compaction import decide_compaction, plan_compaction

    plan, decide = inspect.signature(plan_compaction), inspect.signature(decide_compaction)
    assert plan.parameters == decide.parameters
    assert plan.return_annotation == "CompactionPlan | None"
    assert plan_compaction.__name__ == "plan_compaction"
