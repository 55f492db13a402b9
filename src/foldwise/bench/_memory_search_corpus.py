"""A seeded synthetic corpus for memory search: Chinese, Japanese and English facts, short queries.

Used by the CJK recall check (tests/memory/test_search_recall.py) and `foldwise bench memory`.
Facts follow everyday templates ("我住在{地名}", "{地名}に住んでいます", "I use {tool} daily")
filled with generated names, places, organisations and things, so the corpus has the shape of
user memory: template characters (我, 在, 喜欢, です, I, like) occur everywhere and entity
characters rarely. Each query is a 1-4 character piece of one fact's entity (or a 3-4 letter
English tool name) that occurs as a substring in at most `max_matches` facts, the target among
them: a search that matches short CJK queries and ranks the full match first finds it in its
top 5; one that treats a CJK run as one token (FTS5's built-in tokenizers) finds none.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["SearchCase", "SearchCorpus", "memory_search_corpus"]

_ZH = (
    ("我住在{place}", "place"),
    ("我喜欢{thing}", "thing"),
    ("我在{org}工作", "org"),
    ("我叫{name}", "name"),
    ("我最近在学习{thing}", "thing"),
    ("我不喜欢{thing}", "thing"),
    ("我的老家是{place}", "place"),
)
_JA = (
    ("{jplace}に住んでいます", "jplace"),
    ("{jname}と申します", "jname"),
    ("{thing}が好きです", "thing"),
    ("{jplace}の会社で働いています", "jplace"),
)
_EN = (
    ("I use {tool} every day", "tool"),
    ("My favourite editor is {tool}", "tool"),
    ("I moved to {place} last year", "place"),
    ("I prefer {tool} for {thing} work", "tool"),
)


@dataclass(frozen=True, slots=True)
class SearchCase:
    """One query and the index of the fact it should find."""

    query: str
    target: int


@dataclass(frozen=True, slots=True)
class SearchCorpus:
    """Fact texts and queries with known targets."""

    texts: tuple[str, ...]
    cases: tuple[SearchCase, ...]


class _Names:
    """Generated entity names from a seeded pool of Han characters, kana and Latin syllables."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.han = [chr(c) for c in rng.sample(range(0x4E00, 0x9FA5), 1500)]
        self.kata = [chr(c) for c in range(0x30A2, 0x30F3)]
        self.syllables = ["ka", "ro", "vi", "ne", "zu", "mo", "ta", "pe", "li", "xo", "gu", "sa"]

    def han_word(self, low: int, high: int) -> str:
        return "".join(self.rng.choice(self.han) for _ in range(self.rng.randint(low, high)))

    def make(self, kind: str) -> str:
        rng = self.rng
        if kind == "jname":
            return "".join(rng.choice(self.kata) for _ in range(rng.randint(3, 4)))
        if kind == "tool":
            word = "".join(rng.choice(self.syllables) for _ in range(2))
            return word[: rng.randint(3, 4)].capitalize()
        sizes = {"place": (2, 3), "jplace": (2, 2), "thing": (2, 3), "org": (3, 4), "name": (2, 3)}
        low, high = sizes[kind]
        return self.han_word(low, high)


def _query(rng: random.Random, entity: str) -> str:
    if entity.isascii():
        return entity.lower()
    length = min(len(entity), rng.choice((1, 2, 2, 3, 3, 4)))
    start = rng.randint(0, len(entity) - length)
    return entity[start : start + length]


def memory_search_corpus(
    facts: int = 2000, queries: int = 300, *, seed: int = 20261201, max_matches: int = 5
) -> SearchCorpus:
    """A deterministic corpus of `facts` texts and up to `queries` cases.

    Fewer cases only if the corpus cannot supply that many selective queries.

    Args:
        facts: How many fact texts.
        queries: How many queries with a known target.
        seed: The random seed (same seed, same corpus).
        max_matches: A query occurs as a substring in at most this many facts.
    """
    rng = random.Random(seed)
    names = _Names(rng)
    texts: list[str] = []
    entities: list[str] = []
    for _ in range(facts):
        template, kind = rng.choice(rng.choice((_ZH, _ZH, _JA, _EN)))
        values = {k: names.make(k) for k in ("place", "thing", "org", "name", "jplace", "jname")}
        values["tool"] = names.make("tool")
        texts.append(template.format(**values))
        entities.append(values[kind])
    cases: list[SearchCase] = []
    seen: set[str] = set()
    for _attempt in range(queries * 20):
        if len(cases) == queries:
            break
        target = rng.randrange(facts)
        query = _query(rng, entities[target])
        if query in seen:
            continue
        matches = sum(1 for text in texts if query in text.lower())
        if matches <= max_matches:
            seen.add(query)
            cases.append(SearchCase(query, target))
    return SearchCorpus(tuple(texts), tuple(cases))
