"""Usage anchoring: provider usage is trusted only when stamped for the prefix being counted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from foldwise.tokens import USAGE_STAMP_KEY, RequestCount, TokenCounter, _counter, estimate_tokens
from foldwise.tokens._anchor import EMPTY_PREFIX, prefix_step
from tests._factories import tool_turns


def _usage(input_tokens: int, output_tokens: int = 10) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def _counter_() -> TokenCounter:
    return TokenCounter("estimate", estimate_tokens)


def _answer(
    counter: TokenCounter,
    request: list[BaseMessage],
    input_tokens: int,
    output_tokens: int = 40,
    *,
    static: int = 0,
    id: str = "final",
) -> AIMessage:
    """The run model's answer to `request`, stamped as the middleware does."""
    answer = AIMessage(
        "Here is the answer.", id=id, usage_metadata=_usage(input_tokens, output_tokens)
    )
    return counter.stamp_usage(answer, request, static_tokens=static)


def _anchoredtool_turns(counter: TokenCounter) -> list[BaseMessage]:
    history = tool_turns(3)
    return [*history, _answer(counter, history, 5000)]


def _plain(counter: TokenCounter, messages: list[BaseMessage]) -> int:
    return sum(map(counter.count_message, messages))


# -- defect: trust-on-first-sight of a stale anchor (issue 10, item 2) ------------------------


def test_fresh_counter_ignores_unstamped_stale_usage_after_compaction() -> None:
    # After a compaction the kept tail still holds an answer whose usage measured the 100k
    # request before it; a counter that first sees it (restart, other worker) must not trust it.
    thread: list[BaseMessage] = [
        HumanMessage("Summary: we fixed the build.", id="summary"),
        HumanMessage("thanks", id="h"),
        AIMessage("You're welcome.", id="a", usage_metadata=_usage(100_000, 59)),
    ]
    counter = _counter_()
    plain = _plain(_counter_(), thread)
    assert plain < 60
    assert counter.count_messages(thread) == plain
    assert counter.count_request(thread, static_tokens=7) == RequestCount(
        plain + 7, plain, 7, anchored=False
    )


def test_same_counter_never_trusts_unstamped_usage() -> None:
    counter = _counter_()
    history = [*tool_turns(3), AIMessage("ok", id="final", usage_metadata=_usage(5000, 40))]
    assert counter.count_messages(history) == _plain(counter, history)
    assert counter.count_messages([*history, HumanMessage("x", id="x")]) == _plain(
        counter, [*history, HumanMessage("x", id="x")]
    )


@pytest.mark.parametrize("fresh", [False, True])
def test_stamped_anchor_is_stale_after_compaction(fresh: bool) -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    assert counter.count_messages(history) == 5040
    # A compaction replaced everything before the answer by a summary.
    compacted = [HumanMessage("Summary: three lookups.", id="summary"), history[-1]]
    reader = _counter_() if fresh else counter
    assert reader.count_messages(compacted) == _plain(reader, compacted)
    assert not reader.count_request(compacted).anchored
    # Removing one message before the anchor is enough.
    trimmed = [history[0], *history[4:]]
    assert reader.count_messages(trimmed) == _plain(reader, trimmed)


def test_anchor_stale_when_a_message_before_it_changed_under_the_same_id() -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    edited = list(history)
    edited[3] = ToolMessage("clipped", tool_call_id="c0", id="t0")
    assert counter.count_messages(edited) == _plain(counter, edited)


def test_anchor_stale_when_prefix_order_differs() -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    swapped = [history[0], history[2], history[1], *history[3:]]
    assert counter.count_messages(swapped) == _plain(counter, swapped)


@pytest.mark.parametrize(
    "stamp",
    [
        None,
        "garbage",
        {"prefix": "00", "n": 10, "static": 0},
        {"n": 10, "static": 0},
        {"prefix": None, "n": 10, "static": 0},
    ],
)
def test_forged_or_malformed_stamps_are_ignored(stamp: Any) -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    answer = history[-1]
    metadata = {**answer.response_metadata, USAGE_STAMP_KEY: stamp}
    forged = [*history[:-1], answer.model_copy(update={"response_metadata": metadata})]
    assert counter.count_messages(forged) == _plain(counter, forged)


def test_stamp_with_wrong_position_is_ignored() -> None:
    counter = _counter_()
    history = tool_turns(3)
    answer = _answer(counter, history, 5000)
    shifted = [*history, HumanMessage("between", id="between"), answer]
    assert counter.count_messages(shifted) == _plain(counter, shifted)


# -- verified anchors ---------------------------------------------------------------------------


@pytest.mark.parametrize("fresh", [False, True])
def test_stamped_anchor_is_exact(fresh: bool) -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    reader = _counter_() if fresh else counter
    assert reader.count_messages(history) == 5040
    assert reader.count_messages(history, anchor=False) == _plain(reader, history)
    follow_up = HumanMessage("and one more question " * 10, id="after")
    grown = [*history, follow_up]
    assert reader.count_messages(grown) == 5040 + reader.count_message(follow_up)
    # Messages removed after the anchor do not invalidate it.
    assert reader.count_messages(grown[:-1]) == 5040


def test_anchor_survives_serialization_round_trip() -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    loaded = messages_from_dict(json.loads(json.dumps(messages_to_dict(history))))
    assert loaded[-1].id == "final"
    assert _counter_().count_messages(loaded) == 5040


def test_signature_is_stable_across_processes() -> None:
    # Stamps live in checkpoints and are read by other workers, so the signature must not use
    # the per-process `hash()` seed: these values hold in every process.
    first = prefix_step(EMPTY_PREFIX, HumanMessage("x", id="m1"), 5)
    no_id = ToolMessage([{"type": "text", "text": "no id"}], tool_call_id="c1")
    assert first.hex() == "e9afb6c2458d40ff0ad3455315c4dce0"
    assert prefix_step(first, no_id, 7).hex() == "b602484a76881a1f8c43d958bfd64b57"
    # The count is part of it: an edit under the same id breaks the chain.
    assert prefix_step(EMPTY_PREFIX, HumanMessage("x", id="m1"), 6) != first


def test_latest_verified_anchor_wins() -> None:
    counter = _counter_()
    history = _anchoredtool_turns(counter)
    later = [*history, HumanMessage("next", id="n")]
    later.append(_answer(counter, later, 6000, 5, id="a2"))
    assert counter.count_messages(later) == 6005
    # The latest answer cut off: the earlier anchor is used again.
    assert counter.count_messages(later[:-1]) == 5040 + counter.count_message(later[-2])
    # The latest answer unverifiable (unstamped): the earlier verified one is used.
    plain_answer = AIMessage("ok", id="a3", usage_metadata=_usage(9000, 5))
    assert _counter_().count_messages([*later[:-1], plain_answer]) == (
        5040 + counter.count_message(later[-2]) + counter.count_message(plain_answer)
    )


def test_anchor_ignores_empty_usage() -> None:
    counter = _counter_()
    history = tool_turns(1)
    answer = AIMessage("x", id="z", usage_metadata=_usage(0, 0))
    assert counter.stamp_usage(answer, history, static_tokens=0) is answer
    assert counter.count_messages([*history, answer]) == _plain(counter, [*history, answer])


def test_count_request_replaces_the_stamped_static_size() -> None:
    counter = _counter_()
    history = tool_turns(3)
    history.append(_answer(counter, history, 5000, static=700))
    plain = _plain(counter, history)
    assert counter.count_request(history, static_tokens=700) == RequestCount(
        total=5040, messages=plain, static=700, anchored=True
    )
    # The system prompt or tool schemas grew by 100 tokens since.
    assert counter.count_request(history, static_tokens=800).total == 5140
    assert counter.count_messages(history) == 5040


def test_stamp_usage_keeps_id_and_metadata() -> None:
    counter = _counter_()
    history = tool_turns(2)
    answer = AIMessage(
        "hi", id="resp-1", usage_metadata=_usage(100), response_metadata={"model_name": "m"}
    )
    stamped = counter.stamp_usage(answer, history, static_tokens=12)
    assert stamped is not answer and stamped.id == "resp-1"
    assert stamped.response_metadata["model_name"] == "m"
    stamp = stamped.response_metadata[USAGE_STAMP_KEY]
    assert stamp["n"] == len(history) and stamp["static"] == 12
    assert isinstance(stamp["prefix"], str)
    assert USAGE_STAMP_KEY not in answer.response_metadata  # the original is untouched


def test_stamp_is_never_sent_to_openai() -> None:
    from langchain_openai.chat_models.base import _convert_message_to_dict

    counter = _counter_()
    answer = AIMessage("hi", id="resp-1", usage_metadata=_usage(100))
    stamped = counter.stamp_usage(answer, tool_turns(1), static_tokens=0)
    assert _convert_message_to_dict(stamped) == _convert_message_to_dict(answer)
    assert "foldwise" not in json.dumps(_convert_message_to_dict(stamped, api="responses"))


# -- cost: O(new) -------------------------------------------------------------------------------


def _spy_steps(monkeypatch: pytest.MonkeyPatch) -> list[BaseMessage]:
    steps: list[BaseMessage] = []
    real_step = _counter.prefix_step

    def step(prefix: bytes, message: BaseMessage, tokens: int) -> bytes:
        steps.append(message)
        return real_step(prefix, message, tokens)

    monkeypatch.setattr(_counter, "prefix_step", step)
    return steps


def test_anchored_append_costs_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _spy_steps(monkeypatch)
    counter = _counter_()
    history = tool_turns(3_333)  # 10,000 messages
    history.append(_answer(counter, history, 90_000))
    # Old unstamped usage all over the history must not make the check scan it.
    for index in range(2, len(history) - 1, 3):
        history[index].usage_metadata = _usage(1_000 + index)  # type: ignore[union-attr]
    assert counter.count_messages(history) == 90_040
    steps.clear()
    new = HumanMessage("one more", id="new")
    assert counter.count_messages([*history, new]) == 90_040 + counter.count_message(new)
    assert steps == [new]


def _decoded(history: list[BaseMessage]) -> list[BaseMessage]:
    """`history` as a new run reads it from its checkpoint: equal values, other objects."""
    return messages_from_dict(json.loads(json.dumps(messages_to_dict(history))))


def test_a_history_decoded_anew_costs_only_its_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = _spy_steps(monkeypatch)
    counter = _counter_()
    history = tool_turns(100)
    history.append(_answer(counter, history, 90_000))
    assert counter.count_messages(history) == 90_040
    steps.clear()
    new = HumanMessage("one more", id="new")
    decoded = [*_decoded(history), new]
    assert counter.count_messages(decoded) == 90_040 + counter.count_message(new)
    assert steps == [new]
    assert counter.count_messages([*decoded, AIMessage("ok", id="ok")]) > 90_040
    assert [m.id for m in steps] == ["new", "ok"]  # the decoded objects are the prefix now


@pytest.mark.parametrize("field", ["content", "name", "tool_calls", "tool_call_id"])
def test_a_history_decoded_anew_with_an_edit_is_recounted_from_the_edit(
    monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    steps = _spy_steps(monkeypatch)
    counter = _counter_()
    history = _anchoredtool_turns(counter)  # human, ai (call c0), tool (t0), ..., final
    assert counter.count_messages(history) == 5040
    decoded = _decoded(history)
    index = {"content": 1, "name": 1, "tool_calls": 2, "tool_call_id": 3}[field]
    changes: dict[str, Any] = {
        "content": "an edited question",
        "name": "someone",
        "tool_calls": [{"name": "lookup", "args": {"q": "other"}, "id": "c0"}],
        "tool_call_id": "c9",
    }
    decoded[index] = decoded[index].model_copy(update={field: changes[field]})
    expected = _counter_().count_messages(decoded)
    steps.clear()
    assert counter.count_messages(decoded) == expected
    assert steps[0] is decoded[index]
    assert len(steps) == len(decoded) - index


def _numbers(value: Any) -> list[Any]:
    return [value] * 50


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            AIMessage([{"type": "data", "v": _numbers(1)}]),
            AIMessage([{"type": "data", "v": _numbers(1.0)}]),
        ),
        (
            AIMessage([{"type": "data", "v": _numbers(1)}]),
            AIMessage([{"type": "data", "v": _numbers(True)}]),
        ),
        (
            AIMessage("", tool_calls=[{"name": "f", "args": {"v": _numbers(1)}, "id": "c"}]),
            AIMessage("", tool_calls=[{"name": "f", "args": {"v": _numbers(1.0)}, "id": "c"}]),
        ),
    ],
    ids=["content-int-float", "content-int-bool", "tool-args-int-float"],
)
def test_a_history_decoded_anew_with_equal_values_of_other_types_is_recounted(
    before: AIMessage, after: AIMessage
) -> None:
    """`1 == 1.0 == True`, but their JSON (what is counted) differs: not the same message."""
    counter = _counter_()
    counter.count_messages([HumanMessage("hi", id="h"), before.model_copy(update={"id": "a"})])
    decoded = [HumanMessage("hi", id="h"), after.model_copy(update={"id": "a"})]
    assert counter.count_messages(decoded) == _counter_().count_messages(decoded)
