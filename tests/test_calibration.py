"""Per-thread calibration: the provider's measured numbers move the ratio both ways."""

from __future__ import annotations

import pytest
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

import foldwise
from foldwise._thread_id import NO_THREAD
from foldwise.compaction import CompactionPolicy
from foldwise.middleware._calibration import CALIBRATE_ABOVE, MIN_SCALE, Calibration
from foldwise.testing import ScriptedChatModel

POLICY = CompactionPolicy(context_window=128_000, reserved_output_tokens=4096)


def test_nothing_learned_keeps_the_configured_policy() -> None:
    calibration = Calibration(POLICY)
    calibration.usage("t", measured=1000, estimated=1000)
    calibration.usage("t", measured=int(1000 / CALIBRATE_ABOVE) + 1, estimated=1000)
    assert calibration.scale("t") == 1.0
    assert calibration.policy_for("t") is POLICY


def test_a_usage_report_clearly_below_the_estimate_calibrates_down() -> None:
    calibration = Calibration(POLICY)
    calibration.usage("t", measured=1000, estimated=3000)
    assert calibration.scale("t") == pytest.approx(1 / 3)
    policy = calibration.policy_for("t")
    # The window in estimate units is three times larger: the provider counts 3x less.
    assert policy.context_window == pytest.approx(3 * 128_000, abs=3)
    assert policy.budget_limit == pytest.approx(3 * (128_000 - 4096), abs=6)


def test_a_calibrated_thread_follows_later_usage_down() -> None:
    calibration = Calibration(POLICY)
    calibration.usage("t", measured=3000, estimated=1000)
    assert calibration.scale("t") == pytest.approx(3.0)
    calibration.usage("t", measured=500, estimated=1000)
    assert calibration.scale("t") == pytest.approx(0.5)


def test_the_ratio_never_drops_below_the_floor() -> None:
    calibration = Calibration(POLICY)
    calibration.usage("t", measured=1, estimated=1000)
    assert calibration.scale("t") == MIN_SCALE
    calibration.refusal("u", counted=10, estimated=10_000)
    assert calibration.scale("u") == MIN_SCALE


def test_a_refusal_counting_far_below_the_estimate_follows_the_count() -> None:
    calibration = Calibration(POLICY)
    assert calibration.refusal("t", counted=6400, estimated=19_200) == pytest.approx(1 / 3)


def test_a_refusal_near_the_estimate_still_shrinks_by_a_tenth() -> None:
    calibration = Calibration(POLICY)
    assert calibration.refusal("t", counted=9000, estimated=10_000) == pytest.approx(1.1)
    assert calibration.refusal("t", counted=9000, estimated=10_000) == pytest.approx(1.21)


def test_measured_ratios_below_one_outlive_the_run_but_not_a_threadless_one() -> None:
    calibration = Calibration(POLICY)
    for key in ("t", NO_THREAD):
        calibration.usage(key, measured=1000, estimated=3000)
        calibration.new_run(key)
    assert calibration.scale("t") == pytest.approx(1 / 3)
    assert calibration.scale(NO_THREAD) == 1.0


def _retry_policy(estimated: int, text: str, *, current: float | None) -> CompactionPolicy:
    """The retry's policy after `text` refused a request foldwise estimated at `estimated`."""
    model = ScriptedChatModel(default="ok")
    middleware = foldwise.SummarizationMiddleware(model=model, policy=POLICY)
    if current is not None:  # a ratio measured earlier in the run
        middleware.calibration.usage(NO_THREAD, measured=int(current * 1000), estimated=1000)
    request = ModelRequest(
        model=model,
        messages=[HumanMessage("hello")],
        system_message=None,
        tools=[],
        state={"messages": []},  # type: ignore[typeddict-item]
        runtime=Runtime(context=None),
    )
    return middleware._overflow_policy(request, ValueError(text), estimated)


@pytest.mark.parametrize(
    ("estimated", "text", "counted"),
    [
        # OpenAI, the provider counting 3x less than foldwise: the count is above the limit.
        (
            19_200,
            "Input tokens exceed the configured limit of 6000 tokens. Your messages resulted "
            "in 6400 tokens.",
            6400,
        ),
        # Anthropic, input plus `max_tokens` over the limit: the count is below the limit.
        (
            60_000,
            "input length and `max_tokens` exceed context limit: 20000 + 190000 > 200000",
            20_000,
        ),
        # Near the estimate.
        (
            7000,
            "This model's maximum context length is 6000 tokens. However, your messages "
            "resulted in 6500 tokens.",
            6500,
        ),
    ],
)
@pytest.mark.parametrize("current", [None, 0.3, 3.0])
def test_a_refusal_always_plans_the_retry_smaller_in_provider_units(
    estimated: int, text: str, counted: int, current: float | None
) -> None:
    policy = _retry_policy(estimated, text, current=current)
    assert policy.budget_limit is not None
    # The retry's budget, converted with the refused request's own provider/estimate ratio.
    assert policy.budget_limit * counted / estimated < counted
