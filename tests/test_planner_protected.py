"""The planner never summarizes the newest tool exchange or the current request (issue 10)."""

from __future__ import annotations

import pytest
from langchain_core.messages import BaseMessage

from foldwise.compaction import CompactionPolicy, SkipReason, decide_compaction, plan_compaction
from foldwise.config import parse_config
from tests._factories import LenCounter, ai, human, tool
from tests.test_planner import ids, policy

COUNTER = LenCounter()


def test_newest_tool_result_is_never_summarized_when_it_exceeds_keep() -> None:
    h0, a0, request = human("old question"), ai("old answer"), human("read the big file")
    call, result = ai("", ("c1", "read_file", {})), tool("c1", "r" * 1650)
    msgs = [h0, a0, request, call, result]
    plan = plan_compaction(msgs, policy=policy(keep=("tokens", 1000)), counter=COUNTER)
    assert plan is not None
    assert ids(plan.to_summarize) == [h0.id, a0.id]
    assert ids(plan.preserved) == [request.id, call.id, result.id]
    assert plan.oversized_tail_ids == ()  # no window: nothing has to be clipped


def test_newest_parallel_exchange_stays_whole_under_a_budget_cut() -> None:
    history: list[BaseMessage] = [human("q"), *[ai("x" * 400) for _ in range(4)]]
    call = ai("", ("p1", "a", {}), ("p2", "b", {}))
    msgs = [*history, call, tool("p1", "1" * 300), tool("p2", "2" * 300)]
    pol = policy(
        trigger=None,
        keep=("tokens", 100),
        context_window=1500,
        reserved_output_tokens=0,
        summary_max_tokens=256,
    )
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert plan.trigger == "budget"
    assert ids(plan.preserved)[-3:] == [call.id, msgs[-2].id, msgs[-1].id]
    assert not {m.id for m in msgs[-3:]} & {m.id for m in plan.to_summarize}


def test_oversized_newest_exchange_is_flagged_for_clipping_largest_first() -> None:
    request = human("compare the two files")
    call = ai("", ("p1", "read_file", {}), ("p2", "read_file", {}))
    small, big = tool("p1", "s" * 900), tool("p2", "b" * 2500)
    msgs = [human("o" * 500), ai("y" * 500), request, call, small, big]
    pol = policy(
        trigger=None, context_window=3000, reserved_output_tokens=0, summary_max_tokens=256
    )
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert ids(plan.to_summarize) == [msgs[0].id, msgs[1].id]
    assert ids(plan.preserved) == [request.id, call.id, small.id, big.id]
    assert plan.tail_over_budget
    assert plan.oversized_tail_ids == (big.id, small.id)


def test_oversized_exchange_with_nothing_to_summarize_is_reported_without_a_plan() -> None:
    request, call = human("read it"), ai("", ("c1", "read_file", {}))
    result = tool("c1", "r" * 5000)
    pol = policy(
        trigger=None, context_window=3000, reserved_output_tokens=0, summary_max_tokens=256
    )
    decision = decide_compaction([request, call, result], policy=pol, counter=COUNTER)
    assert decision.plan is None
    assert decision.skip_reason is SkipReason.EVERYTHING_RESCUED
    assert decision.oversized_tail_ids == (result.id,)


def test_a_fitting_exchange_is_not_flagged() -> None:
    msgs = [human("a" * 50), ai("b" * 50), human("c"), ai("", ("c1", "t", {})), tool("c1", "r")]
    pol = policy(context_window=10_000, reserved_output_tokens=0)
    plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
    assert plan is not None
    assert plan.oversized_tail_ids == ()
    assert not plan.tail_over_budget


@pytest.mark.parametrize("mode", ["all", "latest", "none"])
def test_current_request_is_rescued_in_every_mode(mode: str) -> None:
    h0, a0, current = human("first"), ai("ok"), human("CURRENT REQUEST")
    msgs = [h0, a0, current, ai("a"), ai("b"), ai("c")]
    plan = plan_compaction(
        msgs, policy=policy(keep=("messages", 2), preserve_human=mode), counter=COUNTER
    )
    assert plan is not None
    assert current in plan.preserved
    assert current not in plan.to_summarize
    assert current.id in plan.rescued_ids
    assert (h0 in plan.preserved) is (mode == "all")


@pytest.mark.parametrize(
    ("window", "expected"),
    [(None, 2000), (2048, 256), (8192, 512), (32_000, 2000), (128_000, 4000)],
)
def test_summary_allowance_scales_with_the_window(window: int | None, expected: int) -> None:
    models: dict[str, object] = {"name": "m", "use": "x.y:Z"}
    if window is not None:
        models["context_window"] = window
    config = parse_config({"models": [models], "summarization": {"reserved_output_tokens": 1024}})
    assert CompactionPolicy.from_config(config).summary_max_tokens == expected
    assert CompactionPolicy().summary_max_tokens == 2000


def test_budget_cut_reserves_the_policy_summary_allowance() -> None:
    msgs = [human("q"), *[ai(str(i) * 400) for i in range(8)]]

    def kept(allowance: int) -> int:
        pol = policy(
            trigger=None,
            keep=("messages", 20),
            context_window=3000,
            reserved_output_tokens=0,
            summary_max_tokens=allowance,
        )
        plan = plan_compaction(msgs, policy=pol, counter=COUNTER)
        assert plan is not None
        assert plan.estimated_tokens_after <= 3000
        return len(plan.preserved)

    # Room for the tail: 3000 - 2000 = 1000 tokens (2 messages) vs 3000 - 256 (6 messages).
    assert kept(2000) == 1 + 2
    assert kept(256) == 1 + 6
