"""Summary size: a target in the prompt, a condense re-ask, condensing, rendering in full."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from foldwise.compaction import build_summary_prompt
from foldwise.compaction._summarize import generate_summary
from foldwise.config import BUILTIN_EXTRACTIVE
from foldwise.durable import inject_durable_context, render_sections
from foldwise.durable._condense import condense_summary
from foldwise.summarizers import ExtractiveSummarizer
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import estimate_tokens
from tests._factories import LenCounter, ai, human

COUNTER = LenCounter()
HEADINGS = (
    "## Session intent",
    "## User constraints and corrections",
    "## Decisions",
    "## Artifacts",
    "## Errors seen",
    "## Open tasks and next steps",
)


def six_sections(items: int = 11, width: int = 118) -> str:
    """A normal model summary: six sections of bullet items (about 7.8k characters)."""
    blocks = []
    for number, heading in enumerate(HEADINGS):
        lines = [heading]
        for item in range(items):
            text = f"- item {number}.{item} /src/module_{number}_{item}.py keeps the billing flow"
            lines.append((text + " and its retries stable" * 8)[:width])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _resolver(model: BaseChatModel) -> Callable[[str], BaseChatModel]:
    def resolve(name: str) -> BaseChatModel:
        return ExtractiveSummarizer() if name == BUILTIN_EXTRACTIVE else model

    return resolve


def _prompt(target: int | None = None, template: str | None = None) -> str:
    messages = [human(f"step {i}: edit /src/app_{i}.py, keep the API") for i in range(20)]
    messages += [ai(f"step {i} done, tests pass") for i in range(20)]
    prompt = build_summary_prompt(
        messages, None, trim_tokens=None, counter=COUNTER, template=template, target_tokens=target
    )
    assert prompt is not None
    return prompt


def test_a_long_summary_renders_every_section() -> None:
    summary = six_sections()
    assert 7_500 <= len(summary) <= 8_000
    [_contract, data], _ = inject_durable_context([], render_sections({"summary_text": summary}))
    block = str(data.content)
    for heading in HEADINGS:
        assert heading in block, heading
    assert "item 3.10" in block  # the middle of the Artifacts section too


def test_the_prompt_states_the_target_and_keeps_messages_only_templates() -> None:
    assert "about 1,500 tokens" in _prompt(1500)
    assert "{summary_max_tokens}" not in _prompt(1500)
    custom = _prompt(700, template="Summarize this:\n{messages}")
    assert custom.startswith("Summarize this:\n<new_messages>")
    assert custom.rstrip().endswith("rather than dropping a section.")
    assert "about 700 tokens" in custom
    placed = _prompt(900, template="At most {summary_max_tokens} tokens.\n{messages}\nGo.")
    assert placed.startswith("At most 900 tokens.")
    assert placed.endswith("Go.")
    assert "rather than dropping a section" not in placed  # no second instruction
    assert "tokens (roughly" not in _prompt(None)


def test_an_over_target_summary_is_condensed_by_the_same_model_once() -> None:
    long, short = six_sections(), six_sections(items=2, width=60)
    target = 2_000
    model = ScriptedChatModel(responses=[long, short])
    result = generate_summary(
        _prompt(target),
        ["model", BUILTIN_EXTRACTIVE],
        _resolver(model),
        input_tokens=10**6,
        count=COUNTER.count_text,
        timeout=30,
        target_tokens=target,
    )
    assert result.model_name == "model"
    assert result.text == short
    assert len(model.requests) == 2
    condense = str(model.requests[1].messages[-1].content)
    assert "<summary_to_condense>" in condense
    assert "item 3.10" in condense
    assert "about 2,000 tokens" in condense


def test_a_summary_still_over_target_is_condensed_without_cutting_the_middle() -> None:
    long = six_sections()
    target = 2_000
    model = ScriptedChatModel(responses=[long, long[:-10]])
    result = generate_summary(
        _prompt(target),
        ["model"],
        _resolver(model),
        input_tokens=10**6,
        count=COUNTER.count_text,
        timeout=30,
        target_tokens=target,
    )
    assert len(model.requests) == 2
    assert len(result.text) <= target
    for heading in HEADINGS:
        assert heading in result.text
    assert "item 3.0" in result.text  # every section keeps its first item


def test_the_extractive_fallback_gets_the_target() -> None:
    target = 120
    prompt = _prompt(target)
    result = generate_summary(
        prompt,
        [BUILTIN_EXTRACTIVE],
        _resolver(ScriptedChatModel()),
        input_tokens=10**6,
        count=estimate_tokens,
        timeout=30,
        target_tokens=target,
    )
    assert estimate_tokens(result.text) <= target
    # Written within the target by the summarizer itself, not condensed afterwards.
    direct = ExtractiveSummarizer(max_tokens=target).invoke([HumanMessage(prompt)]).content
    assert result.text == direct


def test_condense_keeps_every_heading_within_budget() -> None:
    text = six_sections()
    for budget in (6_000, 2_000, 700, 300):
        out = condense_summary(text, budget, count=len)
        assert len(out) <= budget
        assert all(h in out for h in HEADINGS), budget
    assert condense_summary(text, 10**6, count=len) == text
    assert condense_summary("x" * 500, 100, count=len).startswith("x" * 90)
