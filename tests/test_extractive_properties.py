"""Properties of ExtractiveSummarizer over generated conversations and prompts."""

from __future__ import annotations

import html

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from foldwise.compaction._prompt_transcript import render_transcript
from foldwise.summarizers import MAX_INPUT_FRACTION, ExtractiveSummarizer
from foldwise.tokens import estimate_tokens

_WORDS = [
    "must",
    "never",
    "decided",
    "because",
    "next",
    "Error:",
    "FAILED",
    "src/app.py",
    "https://example.com/x",
    "ABC-12",
    "`run()`",
    "必须",
    "不要",
    "决定",
    "因为",
    "接下来",
    "错误",
    "## Decisions",
    "> quote",
    "- item",
    "None",
    "\n",
    "the",
    "data",
    "测试",
]
_text = st.lists(st.sampled_from(_WORDS) | st.text(max_size=8), max_size=40).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for index in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["human", "ai", "call"]))
        if kind == "human":
            messages.append(HumanMessage(draw(_text)))
        elif kind == "ai":
            messages.append(AIMessage(draw(_text)))
        else:
            call = {"name": "tool", "args": {"path": draw(_text)}, "id": f"c{index}"}
            messages.append(AIMessage(draw(_text), tool_calls=[call]))
            messages.append(ToolMessage(draw(_text), tool_call_id=f"c{index}", name="tool"))
    return messages


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(conversations(), st.integers(20, 600))
def test_raw_summaries_are_bounded_non_empty_and_deterministic(
    messages: list[BaseMessage], max_tokens: int
) -> None:
    summarizer = ExtractiveSummarizer(max_tokens=max_tokens)
    text = summarizer.invoke(messages).content
    assert isinstance(text, str)
    assert text.strip()
    assert summarizer.invoke(messages).content == text
    input_tokens = estimate_tokens(render_transcript(messages))
    if input_tokens:
        assert estimate_tokens(text) <= max(1, min(max_tokens, input_tokens * MAX_INPUT_FRACTION))


@_SETTINGS
@given(conversations(), conversations())
def test_merging_any_previous_summary_stays_bounded(
    first: list[BaseMessage], second: list[BaseMessage]
) -> None:
    summarizer = ExtractiveSummarizer(max_tokens=300)
    previous = summarizer.invoke(first).content
    assert isinstance(previous, str)
    body = html.escape(render_transcript(second), quote=False)
    escaped = html.escape(previous, quote=False)
    prompt = (
        f"<existing_summary>\n{escaped}\n</existing_summary>\n\n<new_messages>\n{body}\n"
        "</new_messages>"
    )
    text = summarizer.invoke([HumanMessage(prompt)]).content
    assert isinstance(text, str)
    assert text.strip()
    assert estimate_tokens(text) <= 300
