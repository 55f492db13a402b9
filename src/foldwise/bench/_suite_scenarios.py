"""Seeded scenarios of the T1 benchmark suite (research/perf.md §5, M1–M5).

- Content runs (M1–M4): `turns` turns of question → tool call → tool result → answer, the tool
  results drawn from one content class of the token benchmark corpus (English prose, Chinese
  prose, numeric JSON, ASCII-escaped Chinese JSON).
- `huge_tool_result`: a short run in which one tool result is about 300,000 tokens.
- Fact runs (M5): coding/research trajectories in English and Chinese with facts planted at
  depths 0–90 % in six categories, each carrying a unique key to look for later.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from foldwise.bench._tokens_corpus import CONTENT_CLASSES, corpus_text

__all__ = [
    "FACT_CATEGORIES",
    "PlantedFact",
    "Scenario",
    "content_scenario",
    "fact_scenario",
    "huge_result_scenario",
    "suite_scenarios",
]

FACT_CATEGORIES = ("constraint", "id", "error", "path", "plan", "decision")
"""Where facts are planted: user constraint, user id, tool error, file path, plan, decision."""


@dataclass(frozen=True)
class PlantedFact:
    """A fact planted in a scenario; `key` is the exact string looked for in requests.

    A `superseded` fact was replaced by a later one of its category (every next-step plan but
    the newest): forgetting it is correct, so it does not count toward retention.
    """

    category: str
    depth: float
    key: str
    superseded: bool = False


@dataclass
class Scenario:
    """One benchmark input.

    Attributes:
        key: Short name.
        title: One line for reports.
        messages: The recorded session.
        facts: Facts to look for (M5 scenarios only).
    """

    key: str
    title: str
    messages: list[BaseMessage]
    facts: list[PlantedFact] = field(default_factory=list)


_CLASSES = {c.key: c for c in CONTENT_CLASSES}
_QUESTIONS_EN = [
    "What does page {n} say about the failure?",
    "Summarise the next batch of records ({n}).",
    "Fetch item {n} and tell me if anything changed.",
    "Check source {n} for the numbers we need.",
]
_QUESTIONS_ZH = ["第 {n} 页讲了什么？", "请汇总第 {n} 批记录。", "检查第 {n} 个来源里的数字。"]


def _turn(index: int, content: str, question: str, answer: str) -> list[BaseMessage]:
    call = f"c{index:04d}"
    return [
        HumanMessage(question),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": index}, "id": call}]),
        ToolMessage(content, tool_call_id=call, name="fetch"),
        AIMessage(answer),
    ]


def content_scenario(key: str, content_class: str, *, turns: int, seed: int = 0) -> Scenario:
    """`turns` tool turns whose results are 2–8 KB samples of `content_class`."""
    rng = random.Random(f"{seed}:{key}")
    content = _CLASSES[content_class]
    zh = "zh" in content_class
    messages: list[BaseMessage] = [SystemMessage("You are a data assistant with a fetch tool.")]
    for index in range(turns):
        question = (
            rng.choice(_QUESTIONS_ZH if zh else _QUESTIONS_EN).format(n=index) + f" (turn {index})"
        )
        answer = f"Turn {index}: noted; the record is consistent with the previous ones."
        sample = content.make(rng, rng.randint(2048, 8192))
        messages.extend(_turn(index, sample, question, answer))
    return Scenario(key, f"{turns} turns, tool results: {content.label}", messages)


def huge_result_scenario(*, turns: int = 10, tokens: int = 300_000, seed: int = 0) -> Scenario:
    """A short run whose third tool result is about `tokens` tokens of English prose."""
    rng = random.Random(f"{seed}:huge")
    prose = corpus_text("english_prose")
    huge = (prose * (tokens * 5 // len(prose) + 1))[: tokens * 5]
    messages: list[BaseMessage] = [SystemMessage("You are a data assistant with a fetch tool.")]
    for index in range(turns):
        content = huge if index == 2 else _CLASSES["en"].make(rng, 3000)
        messages.extend(
            _turn(index, content, f"Fetch document {index}.", f"Document {index} read.")
        )
    return Scenario("huge_tool_result", f"one ~{tokens // 1000}k-token tool result", messages)


# -- planted facts (M5) -----------------------------------------------------------------------

# Each category's fact in English and in Chinese, side by side; `{key}` is the planted key.
_FACT_TEXT: dict[str, tuple[str, str]] = {
    "constraint": (
        "Constraint: never modify the {key} table without a backup.",
        "约束：未经备份，不要修改 {key} 表。",
    ),
    "id": ("Please track this work under incident {key}.", "这项工作请记在事故单 {key} 下。"),
    "error": (
        "ERROR {key}: connection reset by peer while syncing the shard.",
        "ERROR {key}：同步分片时连接被对端重置。",
    ),
    "plan": (
        "Next step: migrate the nightly reconcile job to {key}.",
        "下一步：把夜间对账任务迁移到 {key}。",
    ),
    "decision": (
        "I decided to use advisory locks ({key}) because Redis locks expired.",
        "我决定使用咨询锁（{key}），因为 Redis 锁在高负载下会过期。",
    ),
}


def _fact_text(category: str, key: str, zh: bool) -> str:
    english, chinese = _FACT_TEXT[category]
    return (chinese if zh else english).format(key=key)


def _fact_key(category: str, rng: random.Random) -> str:
    n = rng.randint(1000, 9999)
    return {
        "constraint": f"ledger_{n}",
        "id": f"INC-{n}",
        "error": f"E{n}X",
        "path": f"src/billing/refund_router_{n}.py",
        "plan": f"queue-R{n}",
        "decision": f"DEC-{n}",
    }[category]


def fact_scenario(language: str, *, turns: int, seed: int = 0) -> Scenario:
    """A trajectory with one fact per category at each depth 0 %, 10 %, …, 90 %."""
    rng = random.Random(f"{seed}:facts:{language}")
    zh = language == "zh"
    content = _CLASSES["zh" if zh else "en"]
    depths = [d / 10 for d in range(10)]
    plants: dict[int, list[PlantedFact]] = {}
    facts: list[PlantedFact] = []
    for depth in depths:
        for category in FACT_CATEGORIES:
            superseded = category == "plan" and depth < depths[-1]
            fact = PlantedFact(category, depth, _fact_key(category, rng), superseded)
            facts.append(fact)
            plants.setdefault(int(depth * turns), []).append(fact)
    messages: list[BaseMessage] = [SystemMessage("You are a coding agent with repository tools.")]
    for index in range(turns):
        here = {f.category: f for f in plants.get(index, [])}
        question = rng.choice(_QUESTIONS_ZH if zh else _QUESTIONS_EN).format(n=index)
        for category in ("constraint", "id"):
            if category in here:
                question += " " + _fact_text(category, here[category].key, zh)
        result = content.make(rng, rng.randint(2048, 6144))
        if "error" in here:
            result += "\n" + _fact_text("error", here["error"].key, zh) + "\n"
        calls = [{"name": "fetch", "args": {"page": index}, "id": f"f{index:04d}"}]
        if "path" in here:
            calls.append(
                {"name": "read_file", "args": {"path": here["path"].key}, "id": f"r{index:04d}"}
            )
        answer = f"Turn {index}: checked."
        for category in ("plan", "decision"):
            if category in here:
                answer += " " + _fact_text(category, here[category].key, zh)
        messages.append(HumanMessage(question))
        messages.append(AIMessage("", tool_calls=calls))
        messages.append(ToolMessage(result, tool_call_id=f"f{index:04d}", name="fetch"))
        if "path" in here:
            messages.append(
                ToolMessage("def refund(): ...\n", tool_call_id=f"r{index:04d}", name="read_file")
            )
        messages.append(AIMessage(answer))
    return Scenario(
        f"facts_{language}",
        f"{turns} turns ({language}), {len(facts)} planted facts at depths 0–90%",
        messages,
        facts,
    )


def suite_scenarios(*, quick: bool) -> list[Scenario]:
    """Every T1 scenario; `quick` shortens the runs (40 turns instead of 200)."""
    turns = 40 if quick else 200
    fact_turns = 40 if quick else 120
    return [
        content_scenario("en_prose", "en", turns=turns),
        content_scenario("zh_prose", "zh", turns=turns),
        content_scenario("json_numeric", "json_rows", turns=turns),
        content_scenario("json_zh_ascii", "json_zh_ascii", turns=turns),
        huge_result_scenario(),
        fact_scenario("en", turns=fact_turns),
        fact_scenario("zh", turns=fact_turns),
    ]
