"""The offline rules extractor: explicit statements in the user's own words, English and Chinese.

It reads only user messages (an assistant answer never creates a fact about the user), splits
them into clauses (`split_clauses`), and matches each clause against `PATTERNS`: "my name is /
call me / 我叫", "I live in / I moved to / 我搬到", "I work at / 我在…工作", "I prefer / I like /
我喜欢 / 我不喜欢", "I use / I switched to / 改用…", corrections ("I no longer …", "forget that
I …", "我不再…"), standing requests ("from now on …", "以后…") and generic "remember that …" /
"记住…" statements. A generic statement still becomes a candidate (slot ``note``), so the
scope gate and the quarantine see, and hold, an attack phrased as a memory; so does any clause
no pattern reads that `quarantine_reason` flags ("ignore previous instructions", a fake tag).

The action comes from `known` (the namespace's active facts): the same value again is
REINFORCE, a new value for a filled single-valued slot is SUPERSEDE, a multi-valued slot
(``likes``, ``dislikes``, ``responsibilities``, ``note``) only ever gets ADD, and "I no longer
…" is RETRACT. The extractor yields no I/O; `extract_steps` returns at its first `next`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from langchain_core.messages import BaseMessage

from foldwise._steps import Steps
from foldwise.memory._facts import (
    MAX_FACT_CHARS,
    Candidate,
    Fact,
    FactCategory,
    normalize_slot_part,
)
from foldwise.memory._lexicon import KNOWN_TOPICS, preference_topic, split_clauses, tool_kind
from foldwise.memory._patterns import PATTERNS, clean_value
from foldwise.memory._quarantine import quarantine_reason
from foldwise.messages import is_real_user_message, message_text

__all__ = ["ParsedStatement", "RulesExtractor", "multi_valued_slot", "parse_statement"]

Action = Literal["add", "supersede", "retract", "reinforce"]
_MULTI_VALUED = frozenset({"likes", "dislikes", "responsibilities", "volunteering", "note"})
_FAMILY_SLOTS: dict[str, tuple[str, FactCategory, float]] = {
    # family: (attribute, category, importance)
    "name": ("name", "identity", 0.95),
    "home_city": ("home_city", "location", 0.8),
    "employer": ("employer", "work", 0.75),
    "role": ("role", "work", 0.75),
    "responsibility": ("responsibilities", "work", 0.6),
    "volunteer": ("volunteering", "work", 0.5),
    "language": ("language", "language", 0.8),
    "likes": ("likes", "preference", 0.5),
    "dislikes": ("dislikes", "preference", 0.5),
    "note": ("note", "other", 0.3),
}


def multi_valued_slot(attribute: str) -> bool:
    """Whether a slot holds several facts ("likes", notes): a new one supersedes none."""
    return attribute in _MULTI_VALUED or attribute.startswith("note:")


_ALSO = re.compile(r"\b(?:also|as well|too|additionally)\b|我(?:也|还)", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedStatement:
    """One clause understood: the slot it fills, its value, and whether it closes the slot."""

    attribute: str
    value: str
    category: FactCategory
    importance: float
    multi_valued: bool
    retract: bool
    standing_unknown: bool = False
    """A standing request ("from now on …") on no known preference topic: an instruction to
    the agent, labelled ``directive`` so the gate refuses it (fail-closed)."""


def _slot(family: str, value: str, topic: str | None) -> tuple[str, FactCategory, float]:
    """The slot attribute, category and importance of a statement of `family`."""
    if family == "tool":
        words = value.split()
        kind = tool_kind(value) or normalize_slot_part(words[0] if words else value)
        return f"tool:{kind}", "tooling", 0.65
    if family in ("prefer", "standing"):
        name = normalize_slot_part(topic) if topic else preference_topic(value)
        return f"preference:{name}", "preference", 0.7
    return _FAMILY_SLOTS[family]


def parse_statement(clause: str) -> ParsedStatement | None:
    """The explicit statement `clause` makes about the user, or None (no pattern matches)."""
    for pattern in PATTERNS:
        match = pattern.regex.search(clause)
        if match is None:
            continue
        groups = match.groupdict()
        raw = groups.get("value") or groups.get("value2") or ""
        value = clean_value(raw)
        if pattern.family in ("forget", "remember", "standing"):
            inner = parse_statement(value) if value != clause.strip() else None
            if inner is not None and pattern.family == "forget":
                return replace(inner, retract=True)
            if inner is not None:
                return inner
            if pattern.family == "forget":
                return None
            family = "note" if pattern.family == "remember" else "standing"
        else:
            family = pattern.family
        if not value and not (pattern.retract and family == "employer"):
            continue
        attribute, category, importance = _slot(family, value, groups.get("topic"))
        unknown = family == "standing" and attribute.removeprefix("preference:") not in KNOWN_TOPICS
        multi = attribute in _MULTI_VALUED or (
            family in ("employer", "role") and bool(_ALSO.search(clause)) and not pattern.retract
        )
        return ParsedStatement(
            attribute, value, category, importance, multi, pattern.retract, unknown
        )
    return None


def _value_in(value: str, fact: Fact) -> bool:
    folded = value.casefold()
    return bool(folded) and folded in fact.text.casefold()


def _action(
    parsed: ParsedStatement, known: Sequence[Fact]
) -> tuple[Action, float]:  # (action, confidence)
    in_slot = [f for f in known if f.subject == "user" and f.attribute == parsed.attribute]
    if parsed.retract:
        return "retract", 0.95
    if any(_value_in(parsed.value, fact) for fact in in_slot):
        return "reinforce", 0.9
    if parsed.multi_valued or not in_slot:
        return "add", 0.9
    return "supersede", 0.95


def _candidate(
    parsed: ParsedStatement, clause: str, evidence: str, known: Sequence[Fact]
) -> Candidate:
    action, confidence = _action(parsed, known)
    return Candidate(
        authority="directive" if parsed.standing_unknown else "descriptive",
        action=action,
        subject="user",
        attribute=parsed.attribute,
        text=clause,
        category=parsed.category,
        confidence=confidence,
        importance=parsed.importance,
        evidence=(evidence,),
        value=parsed.value,
        multi_valued=parsed.multi_valued,
    )


def _suspect(clause: str, evidence: str) -> Candidate:
    """A clause no pattern reads but the quarantine would hold: proposed so it is held."""
    return Candidate(
        attribute="note",
        text=clause,
        confidence=0.9,
        importance=0.1,
        authority="directive",
        evidence=(evidence,),
        multi_valued=True,
    )


class RulesExtractor:
    """Deterministic, offline extraction of explicit user statements (EN + ZH).

    The embedded default when no model is configured, and the fallback when the model fails.
    Labels every candidate ``user``/``durable``/``descriptive``: it cannot judge scope, so the
    scope gate and the quarantine re-check every text (fail-closed).
    """

    name = "rules"

    def extract(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact] = ()
    ) -> list[Candidate]:
        """The candidates of `messages`' user statements, in order (no I/O)."""
        candidates: list[Candidate] = []
        for message in messages:
            if not is_real_user_message(message) or not message.id:
                continue
            for whole in split_clauses(message_text(message)):
                clause = whole[:MAX_FACT_CHARS]  # memory holds facts, not documents
                parsed = parse_statement(clause)
                if parsed is not None:
                    candidates.append(_candidate(parsed, clause, message.id, known))
                elif quarantine_reason(clause) is not None:
                    candidates.append(_suspect(clause, message.id))
        return candidates

    def extract_steps(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact]
    ) -> Steps[list[Candidate]]:
        """`extract` as a step generator (it yields nothing)."""
        return self.extract(messages, known=known)
        yield  # pragma: no cover - makes this a generator
