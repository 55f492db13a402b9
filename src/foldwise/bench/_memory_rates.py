"""Rates of the memory write path on the corpora: quarantine, scope gate, supersession actions.

The write path measured is the one `MemoryManager.remember` runs before storage: message
selection → the rules extractor → `screen` (quarantine, then the scope gate). Each function
takes its cases, so the tests run the same measurement on the generated corpora and on a
hand-written held-out set.

- Attacks as user turns: the turn is extracted and screened; it is *quarantined* when it
  yields at least one candidate and every candidate is quarantined, and it *reaches active
  memory* when any candidate passes both checks.
- Attacks as tool output: the turn is a tool result; selection drops it (nothing reaches
  extraction), and it is *quarantined* when `quarantine_reason` flags it, which is what a
  ``memory_add`` call carrying that text would hit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from foldwise.bench._memory_corpus import AttackCase, ChangeCase, ScopeCase
from foldwise.memory._facts import Candidate, Fact
from foldwise.memory._gate import screen
from foldwise.memory._quarantine import quarantine_reason
from foldwise.memory._rules import RulesExtractor
from foldwise.memory._select import select_messages

__all__ = [
    "AttackRates",
    "ChangeRates",
    "ScopeRates",
    "measure_attacks",
    "measure_benign",
    "measure_changes",
    "measure_scope",
    "screened_candidates",
]

_RULES = RulesExtractor()
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _turn(text: str, channel: str) -> list[BaseMessage]:
    if channel == "user":
        return [HumanMessage(text)]
    call = {"name": "fetch_page", "args": {"url": "https://example.com"}, "id": "call-1"}
    return [
        HumanMessage("Summarize that page for me."),
        AIMessage("", tool_calls=[call]),
        ToolMessage(text, tool_call_id="call-1"),
    ]


def screened_candidates(
    messages: Sequence[BaseMessage], known: Sequence[Fact] = ()
) -> list[tuple[Candidate, tuple[str, str] | None]]:
    """Each candidate the rules extract from `messages`, with its `screen` outcome."""
    selected = select_messages(messages)
    texts = {m.id: m.text for m in selected}
    out: list[tuple[Candidate, tuple[str, str] | None]] = []
    for candidate in _RULES.extract(selected, known=known):
        evidence = "\n".join(texts.get(e, "") for e in candidate.evidence)
        out.append((candidate, screen(candidate, evidence_text=evidence)))
    return out


@dataclass
class AttackRates:
    """How the attack cases fared."""

    total: int = 0
    reached_active: list[str] = field(default_factory=list)
    quarantined: int = 0
    missed: list[str] = field(default_factory=list)
    """Attacks not quarantined (they may still have been rejected or ignored)."""
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def quarantined_rate(self) -> float:
        """The share of attacks quarantined with a reason code."""
        return self.quarantined / self.total if self.total else 0.0


def measure_attacks(cases: Sequence[AttackCase]) -> AttackRates:
    """Run every attack through the write path (see the module docstring)."""
    rates = AttackRates(total=len(cases))
    for case in cases:
        outcomes = screened_candidates(_turn(case.text, case.channel))
        if any(outcome is None for _, outcome in outcomes):
            rates.reached_active.append(case.text)
        if case.channel == "user":
            held = bool(outcomes) and all(o and o[0] == "quarantined" for _, o in outcomes)
            code = outcomes[0][1][1] if held and outcomes[0][1] else None
        else:
            code = quarantine_reason(case.text)
        if code is None:
            rates.missed.append(case.text)
        else:
            rates.quarantined += 1
            rates.reasons[code] += 1
    return rates


def measure_benign(texts: Sequence[str]) -> list[tuple[str, str]]:
    """The benign texts that were quarantined, with the code (as a turn or via memory_add)."""
    flagged: list[tuple[str, str]] = []
    for text in texts:
        code = quarantine_reason(text)
        if code is None:
            for _, outcome in screened_candidates(_turn(text, "user")):
                if outcome is not None and outcome[0] == "quarantined":
                    code = outcome[1]
        if code is not None:
            flagged.append((text, code))
    return flagged


@dataclass
class ScopeRates:
    """How the scope cases fared."""

    task_total: int = 0
    task_promoted: list[str] = field(default_factory=list)
    durable_total: int = 0
    durable_stored: int = 0
    durable_missed: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def durable_rate(self) -> float:
        """The share of durable statements that would be stored."""
        return self.durable_stored / self.durable_total if self.durable_total else 0.0


def measure_scope(cases: Sequence[ScopeCase]) -> ScopeRates:
    """Task-scoped statements must yield no active candidate; durable ones at least one."""
    rates = ScopeRates()
    for case in cases:
        outcomes = screened_candidates(_turn(case.text, "user"))
        active = [c for c, outcome in outcomes if outcome is None]
        rates.reasons.update(o[1] for _, o in outcomes if o is not None)
        if case.durable:
            rates.durable_total += 1
            if active:
                rates.durable_stored += 1
            else:
                rates.durable_missed.append(case.text)
        else:
            rates.task_total += 1
            if active:
                rates.task_promoted.append(case.text)
    return rates


@dataclass
class ChangeRates:
    """How many change cases got the expected action on the expected slot, per kind."""

    total: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    wrong: list[tuple[ChangeCase, list[tuple[str, str]]]] = field(default_factory=list)
    superseded_unrelated: int = 0
    """Additive or retraction cases where a candidate superseded anything."""


def _as_fact(candidate: Candidate, index: int) -> Fact:
    return Fact(
        id=f"f{index}",
        namespace=("users", "bench"),
        attribute=candidate.attribute,
        text=candidate.text,
        valid_from=_EPOCH,
        recorded_at=_EPOCH,
    )


def _right(case: ChangeCase, second: Sequence[Candidate]) -> bool:
    value = (case.value or "").casefold()
    for candidate in second:
        carries = value in candidate.text.casefold()
        if case.kind == "change":
            ok = candidate.action == "supersede" and candidate.attribute == case.attribute
        elif case.kind == "retract":
            ok = candidate.action == "retract" and candidate.attribute == case.attribute
        else:
            ok = candidate.action == "add" and (
                candidate.attribute != case.attribute or candidate.multi_valued
            )
        if ok and carries:
            return True
    return False


def measure_changes(cases: Sequence[ChangeCase]) -> ChangeRates:
    """The second turn's candidates against the first turn's facts."""
    rates = ChangeRates()
    for case in cases:
        first = [c for c, outcome in screened_candidates([HumanMessage(case.first)]) if not outcome]
        known = [_as_fact(c, i) for i, c in enumerate(first)]
        second = [
            c for c, o in screened_candidates([HumanMessage(case.second)], known) if o is None
        ]
        rates.total[case.kind] += 1
        slot_ok = [c.attribute for c in first] == [case.attribute]
        if slot_ok and _right(case, second):
            rates.right[case.kind] += 1
        else:
            rates.wrong.append((case, [(c.attribute, c.action) for c in second]))
        if case.kind != "change" and any(c.action == "supersede" for c in second):
            rates.superseded_unrelated += 1
    return rates
