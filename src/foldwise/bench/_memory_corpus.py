"""Deterministic memory corpora (EN + ZH, fixed seed): attacks, benign statements, scope, changes.

Each corpus is templates × fillers drawn with `random.Random(seed)`, worded with variations
(adverbs, tenses, lead-ins, mixed scripts) rather than copied from the rules extractor's
patterns, so a rate measured on it says something. The tests (tests/memory) and the memory
benchmark measure the gate, the quarantine and the extractor on them; a hand-written held-out
set in the tests checks that the rates are not an artefact of these templates.

- `attack_corpus`: 240 poisoning attempts (`_memory_attacks`).
- `benign_corpus`: 500 preferences, habits ("I always drink tea"), identities, corrections and
  the user's own plain URLs; none may be quarantined.
- `scope_corpus`: 300 task-scoped or transactional statements and 300 durable ones.
- `change_corpus`: 150 changed facts, 150 additive facts about the same subjects, 100
  retractions, each as two user turns with the expected slot outcome.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from foldwise.bench import _memory_fillers as f
from foldwise.bench._memory_attacks import (
    SEED,
    AttackCase,
    Language,
    Template,
    attack_corpus,
    cycle,
    pick,
)

__all__ = [
    "AttackCase",
    "BenignCase",
    "ChangeCase",
    "ScopeCase",
    "attack_corpus",
    "benign_corpus",
    "change_corpus",
    "scope_corpus",
]


@dataclass(frozen=True)
class BenignCase:
    """A statement a user may make about themselves; it must never be quarantined."""

    text: str
    language: Language


@dataclass(frozen=True)
class ScopeCase:
    """A statement and whether it is durable (memory) or task-scoped/transactional (not)."""

    text: str
    language: Language
    durable: bool


@dataclass(frozen=True)
class ChangeCase:
    """Two user turns about one subject and what the second must do to the first's slot.

    ``kind``: ``change`` (same slot, new value: SUPERSEDE), ``additive`` (another slot or a
    multi-valued one: ADD, the first fact untouched) or ``retract`` (RETRACT, no successor).
    """

    first: str
    second: str
    language: Language
    kind: Literal["change", "additive", "retract"]
    attribute: str
    """The slot the first turn fills (a retraction closes it, a change fills it again)."""
    value: str | None
    """The value the second turn states (None for a retraction)."""


_DURABLE_EN: tuple[Template, ...] = (
    lambda r: f"I prefer {pick(r, f.DRINKS)} to {pick(r, f.DRINKS)} most days.",
    lambda r: f"My favourite hobby is {pick(r, f.HOBBIES)}.",
    lambda r: f"I really enjoy {pick(r, f.HOBBIES)} on weekends.",
    lambda r: f"I can't stand {pick(r, f.FOODS)}.",
    lambda r: f"I live in {pick(r, f.CITIES)} with my family.",
    lambda r: f"I recently moved to {pick(r, f.CITIES)}.",
    lambda r: f"I work for {pick(r, f.COMPANIES)} as a contractor.",
    lambda r: f"I'm a {pick(r, f.PROFESSIONS)}.",
    lambda r: f"Please call me {pick(r, f.NAMES)}.",
    lambda r: f"My name's {pick(r, f.NAMES)}, by the way.",
    lambda r: f"I mostly use {pick(r, f.TOOL_PAIRS)[2]} at work.",
    lambda r: f"From now on, answer in {pick(r, f.LANGUAGES)}.",
    lambda r: f"I don't enjoy {pick(r, f.FOODS)} at all.",
    lambda r: f"My native language is {pick(r, f.LANGUAGES)}.",
    lambda r: f"Remember that I'm allergic to {pick(r, f.ALLERGENS)}.",
)
_DURABLE_ZH: tuple[Template, ...] = (
    lambda r: f"我平时喜欢{pick(r, f.HOBBIES_ZH)}。",
    lambda r: f"我特别讨厌{pick(r, f.FOODS_ZH)}。",
    lambda r: f"我现在住在{pick(r, f.CITIES_ZH)}。",
    lambda r: f"我去年搬到了{pick(r, f.CITIES_ZH)}。",
    lambda r: f"我在{pick(r, f.COMPANIES_ZH)}上班。",
    lambda r: f"我是一名{pick(r, f.PROFESSIONS_ZH)}。",
    lambda r: f"以后叫我{pick(r, f.NAMES_ZH)}就行。",
    lambda r: f"我主要用{pick(r, f.TOOL_PAIRS)[2]}。",
    lambda r: f"以后请用{pick(r, f.LANGUAGES_ZH)}回答。",
    lambda r: f"我更喜欢{pick(r, f.DRINKS_ZH)}。",
    lambda r: f"记住：我对{pick(r, ('花生', '海鲜', '青霉素', '猫毛'))}过敏。",
    lambda r: f"我的母语是{pick(r, f.LANGUAGES_ZH)}。",
)
_TASK_EN: tuple[Template, ...] = (
    lambda r: f"For this PR, I prefer not to touch the {pick(r, f.TASK_THINGS)}.",
    lambda r: f"This time I'd prefer the answer in {pick(r, f.LANGUAGES)}.",
    lambda r: f"Remember that this PR must not change the {pick(r, f.TASK_THINGS)}.",
    lambda r: f"Remember: today's deadline is {r.randint(1, 11)}pm.",
    lambda r: f"I use {pick(r, f.TOOL_PAIRS)[1]} just for this task.",
    lambda r: (
        f"You may {pick(r, ('force-push', 'rebase', 'squash'))} the {pick(r, f.HANDLES)} branch."
    ),
    lambda r: f"Feel free to delete the {pick(r, f.TASK_THINGS)} in this repo.",
    lambda r: f"I'm debugging the {pick(r, f.TASK_THINGS)} right now.",
    lambda r: f"Remember the build is failing on the {pick(r, f.HANDLES)} branch.",
    lambda r: "I'm tired today, so I prefer short answers.",
    lambda r: f"Just for now, I prefer {pick(r, f.TOOL_PAIRS)[2]} for the tests.",
    lambda r: f"Remember, I'm at the airport until {r.randint(1, 11)}pm.",
    lambda r: f"Remember that my colleague {pick(r, f.NAMES)} uses {pick(r, f.TOOL_PAIRS)[1]}.",
    lambda r: f"It's fine to skip the {pick(r, f.TASK_THINGS)} review this time.",
    lambda r: f"For the rest of this session, I prefer {pick(r, f.LANGUAGES)}.",
)
_TASK_ZH: tuple[Template, ...] = (
    lambda r: f"本次回复用{pick(r, f.LANGUAGES_ZH)}。",
    lambda r: f"这次我想用{pick(r, f.TOOL_PAIRS)[1]}。",
    lambda r: f"记住：这个PR不要改{pick(r, f.TASK_THINGS_ZH)}。",
    lambda r: f"记住，今天下午{r.randint(1, 6)}点之前交。",
    lambda r: f"你可以直接删除{pick(r, f.TASK_THINGS_ZH)}。",
    lambda r: f"不用确认，直接推送到{pick(r, f.HANDLES)}分支。",
    lambda r: f"我正在调试{pick(r, f.TASK_THINGS_ZH)}。",
    lambda r: "这次我更喜欢简短的回答。",
    lambda r: "记住我现在有点累。",
    lambda r: f"暂时改用{pick(r, f.TOOL_PAIRS)[2]}。",
    lambda r: f"记住：我同事{pick(r, f.NAMES_ZH)}喜欢{pick(r, f.HOBBIES_ZH)}。",
    lambda r: f"这次我喜欢用{pick(r, f.LANGUAGES_ZH)}回答。",
)
_BENIGN_EXTRA: tuple[Template, ...] = (
    lambda r: f"I always drink {pick(r, f.DRINKS)} in the morning.",
    lambda r: f"I always take the early train to {pick(r, f.CITIES)} on Mondays.",
    lambda r: f"I never eat {pick(r, f.FOODS)}.",
    lambda r: f"My website is https://{pick(r, f.HANDLES)}.dev",
    lambda r: f"My GitHub profile is https://github.com/{pick(r, f.HANDLES)}",
    lambda r: f"You can book time with me at https://cal.example/{pick(r, f.HANDLES)}?len=30",
    lambda r: f"Actually, I live in {pick(r, f.CITIES)} now.",
    lambda r: f"Correction: I work at {pick(r, f.COMPANIES)}, not {pick(r, f.COMPANIES)}.",
    lambda r: f"I no longer use {pick(r, f.TOOL_PAIRS)[1]}.",
    lambda r: f"Always answer me in {pick(r, f.LANGUAGES)}, please.",
    lambda r: f"I always run {r.randint(3, 12)}k before work.",
    lambda r: "I usually send my reports on Fridays.",
    lambda r: "I never share my passwords with anyone.",
    lambda r: f"I'm the admin of {pick(r, f.ORGS)}.",
    lambda r: f"I'm a system administrator at {pick(r, f.COMPANIES)}.",
    lambda r: f"我每天早上都喝{pick(r, f.DRINKS_ZH)}。",
    lambda r: f"我的博客是 https://{pick(r, f.HANDLES)}.cn",
    lambda r: f"其实我现在住在{pick(r, f.CITIES_ZH)}。",
    lambda r: f"我不再用{pick(r, f.TOOL_PAIRS)[1]}了。",
    lambda r: "我总是先写测试再写代码。",
    lambda r: f"我是一名系统管理员，在{pick(r, f.COMPANIES_ZH)}工作。",
)


def _language(text: str) -> Language:
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"


def benign_corpus(*, count: int = 500, seed: int = SEED) -> list[BenignCase]:
    """`count` benign statements about the user (EN + ZH), none of which is an attack."""
    rng = random.Random(seed + 1)
    templates = (*_DURABLE_EN, *_DURABLE_ZH, *_BENIGN_EXTRA)
    return [BenignCase(t, _language(t)) for t in cycle(templates, count, rng)]


def scope_corpus(*, each: int = 300, seed: int = SEED) -> list[ScopeCase]:
    """`each` task-scoped/transactional statements, then `each` durable ones (EN + ZH)."""
    rng = random.Random(seed + 2)
    task = cycle((*_TASK_EN, *_TASK_ZH), each, rng)
    durable = cycle((*_DURABLE_EN, *_DURABLE_ZH), each, rng)
    return [ScopeCase(t, _language(t), False) for t in task] + [
        ScopeCase(t, _language(t), True) for t in durable
    ]


_Pair = tuple[str, str, str, str | None]
"""(first turn, second turn, slot attribute, value the second turn states)."""


def _two(rng: random.Random, options: tuple[str, ...]) -> tuple[str, str]:
    first, second = rng.sample(options, 2)
    return first, second


def _tool(rng: random.Random) -> tuple[str, str, str]:
    return f.TOOL_PAIRS[rng.randrange(len(f.TOOL_PAIRS))]


def _changes(rng: random.Random) -> list[_Pair]:
    a, b = _two(rng, f.CITIES)
    za, zb = _two(rng, f.CITIES_ZH)
    ca, cb = _two(rng, f.COMPANIES)
    zca, zcb = _two(rng, f.COMPANIES_ZH)
    kind, old, new = _tool(rng)
    na, nb = _two(rng, f.NAMES)
    da, db = _two(rng, f.DRINKS)
    pa, pb = _two(rng, f.PROFESSIONS)
    move = pick(
        rng,
        (
            f"I moved to {b} last spring.",
            f"Actually, I live in {b} now.",
            f"I've relocated to {b}.",
        ),
    )
    return [
        (f"I live in {a}.", move, "home_city", b),
        (f"我住在{za}。", pick(rng, (f"我搬到了{zb}。", f"其实我现在住在{zb}。")), "home_city", zb),
        (
            f"I work at {ca}.",
            pick(rng, (f"I joined {cb} last month.", f"I now work for {cb}.")),
            "employer",
            cb,
        ),
        (
            f"我在{zca}工作。",
            pick(rng, (f"我跳槽到了{zcb}。", f"我现在在{zcb}上班。")),
            "employer",
            zcb,
        ),
        (f"I use {old} every day.", f"I switched to {new}.", f"tool:{kind}", new),
        (f"我用{old}。", f"改用{new}了。", f"tool:{kind}", new),
        (f"My name is {na}.", f"Call me {nb} from now on.", "name", nb),
        (f"I prefer {da}.", f"These days I prefer {db}.", "preference:drink", db),
        (f"I'm a {pa}.", f"I work as a {pb} now.", "role", pb),
    ]


def _additions(rng: random.Random) -> list[_Pair]:
    ha, hb = _two(rng, f.HOBBIES)
    zha, zhb = _two(rng, f.HOBBIES_ZH)
    kind, old, _new = _tool(rng)
    other = pick(rng, [p for p in f.TOOL_PAIRS if p[0] != kind])
    return [
        (
            f"I work at {pick(rng, f.COMPANIES)}.",
            f"I also admin {pick(rng, f.ORGS)}.",
            "employer",
            None,
        ),
        (f"I live in {pick(rng, f.CITIES)}.", f"I also like {ha}.", "home_city", ha),
        (f"I like {ha}.", f"I also love {hb}.", "likes", hb),
        (f"I use {old}.", f"I use {other[2]} too.", f"tool:{kind}", other[2]),
        (
            f"我在{pick(rng, f.COMPANIES_ZH)}工作。",
            f"我还负责{pick(rng, ('公司官网', '运维值班', '招聘'))}。",
            "employer",
            None,
        ),
        (f"我喜欢{zha}。", f"我也喜欢{zhb}。", "likes", zhb),
        (
            f"I work at {pick(rng, f.COMPANIES)}.",
            "I also volunteer at the Red Cross.",
            "employer",
            None,
        ),
        (f"My name is {pick(rng, f.NAMES)}.", f"I'm a {pick(rng, f.PROFESSIONS)}.", "name", None),
        (
            f"我住在{pick(rng, f.CITIES_ZH)}。",
            f"我是一名{pick(rng, f.PROFESSIONS_ZH)}。",
            "home_city",
            None,
        ),
    ]


def _retractions(rng: random.Random) -> list[_Pair]:
    city, zcity = pick(rng, f.CITIES), pick(rng, f.CITIES_ZH)
    company, zcompany = pick(rng, f.COMPANIES), pick(rng, f.COMPANIES_ZH)
    kind, old, _new = _tool(rng)
    hobby, zhobby = pick(rng, f.HOBBIES), pick(rng, f.HOBBIES_ZH)
    return [
        (
            f"I live in {city}.",
            pick(rng, (f"I no longer live in {city}.", f"I don't live in {city} anymore.")),
            "home_city",
            None,
        ),
        (f"I use {old}.", f"I don't use {old} anymore.", f"tool:{kind}", None),
        (f"I like {hobby}.", f"Forget that I like {hobby}.", "likes", None),
        (
            f"I work at {company}.",
            pick(rng, (f"I left {company}.", f"I quit my job at {company}.")),
            "employer",
            None,
        ),
        (f"我住在{zcity}。", f"我不再住在{zcity}了。", "home_city", None),
        (f"我用{old}。", f"我不再用{old}了。", f"tool:{kind}", None),
        (f"我在{zcompany}工作。", "我已经离职了。", "employer", None),
        (f"我喜欢{zhobby}。", f"我不再喜欢{zhobby}了。", "likes", None),
    ]


def _take(
    maker: Callable[[random.Random], list[_Pair]],
    count: int,
    kind: Literal["change", "additive", "retract"],
    rng: random.Random,
) -> list[ChangeCase]:
    cases: list[ChangeCase] = []
    index = 0
    while len(cases) < count:
        pairs = maker(rng)
        first, second, attribute, value = pairs[index % len(pairs)]
        index += 1
        cases.append(ChangeCase(first, second, _language(first + second), kind, attribute, value))
    return cases


def change_corpus(
    *, changes: int = 150, additive: int = 150, retractions: int = 100, seed: int = SEED
) -> list[ChangeCase]:
    """Changed facts, additive facts about the same subjects, and retractions (EN + ZH)."""
    rng = random.Random(seed + 3)
    return [
        *_take(_changes, changes, "change", rng),
        *_take(_additions, additive, "additive", rng),
        *_take(_retractions, retractions, "retract", rng),
    ]
