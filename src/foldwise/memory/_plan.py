"""Turn screened candidates into one atomic write: new facts, closed facts, decisions.

Pure: given the namespace's active facts and the candidates in order, `plan_writes` says what
to store. Supersession is per slot: a new value for a single-valued slot closes the slot's
active facts (``valid_to``, ``superseded_by``) in the same write; a multi-valued slot ("likes")
only grows; facts in other slots are never touched. The same value again reinforces the
existing fact instead of adding a twin. Every closed fact carries the revision it was read at,
so a concurrent writer makes the whole write fail (`RevisionConflictError`) instead of losing
an update.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from foldwise.memory._contracts import FactChange
from foldwise.memory._facts import (
    Candidate,
    Fact,
    FactSource,
    FactStatus,
    MemoryDecision,
    Namespace,
    Slot,
    normalize_slot_part,
)

__all__ = ["Screened", "WritePlan", "new_fact_id", "plan_writes", "same_value"]

_REINFORCE_STEP = 0.1


def new_fact_id() -> str:
    """A fresh fact id: ``fact_`` and 24 hex digits."""
    return f"fact_{uuid.uuid4().hex[:24]}"


def same_value(a: str, b: str) -> bool:
    """Whether two fact texts say the same (case, width, spacing and final punctuation aside)."""
    return _folded(a) == _folded(b)


def _carries(fact: Fact, candidate: Candidate) -> bool:
    """Whether `fact` holds the value `candidate` states (same text, or its stated value)."""
    if same_value(fact.text, candidate.text):
        return True
    value = _folded(candidate.value or "")
    return bool(value) and value in _folded(fact.text)


def _folded(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(".!。！")


@dataclass(frozen=True)
class Screened:
    """A candidate and what the gate and the quarantine said of it (`None`: passed)."""

    candidate: Candidate
    rejected: str | None = None
    quarantined: str | None = None


@dataclass
class WritePlan:
    """What one `remember` (or API call) writes, all in one `MemoryBackend.write`."""

    new: list[Fact] = field(default_factory=list)
    changes: dict[str, FactChange] = field(default_factory=dict)
    decisions: list[MemoryDecision] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to write (decisions alone are not stored here)."""
        return not self.new and not self.changes


@dataclass
class _Planner:
    namespace: Namespace
    now: datetime
    source: FactSource
    min_confidence: float
    new_id: Callable[[], str]
    active: dict[Slot, list[Fact]]
    fact_ids: Sequence[str] | None = None
    index: int = 0
    plan: WritePlan = field(default_factory=WritePlan)

    def decide(self, item: Screened) -> None:
        c = item.candidate
        slot = (normalize_slot_part(c.subject), normalize_slot_part(c.attribute))
        if item.rejected:
            self._note("rejected", slot, c, reason=item.rejected)
        elif item.quarantined:
            fact = self._fact(c, slot, status="quarantined", reason=item.quarantined)
            self.plan.new.append(fact)
            self._note("quarantined", slot, c, fact_id=fact.id, reason=item.quarantined)
        elif c.action == "noop":
            self._note("noop", slot, c, reason="nothing_to_remember")
        elif c.action == "retract":
            self._retract(c, slot)
        elif c.confidence < self.min_confidence:
            self._note("rejected", slot, c, reason="low_confidence")
        else:
            self._store(c, slot)

    def _store(self, c: Candidate, slot: Slot) -> None:
        current = self.active.get(slot, [])
        twin = next((f for f in current if _carries(f, c)), None)
        if twin is not None and c.evidence and set(c.evidence) <= set(twin.source.message_ids):
            # The same messages read again (a replayed slice, a run with no new input).
            self._note("deduplicated", slot, c, fact_id=twin.id, reason="already_remembered")
            return
        if twin is not None:
            confidence = min(1.0, max(twin.confidence, c.confidence) + _REINFORCE_STEP)
            self._change(twin, twin.status, confidence=confidence)
            self._note("reinforce", slot, c, fact_id=twin.id)
            return
        fact = self._fact(c, slot, status="active")
        closed = [] if c.multi_valued else list(current)
        for old in closed:
            self._close(old, "superseded", superseded_by=fact.id)
        self.plan.new.append(fact)
        self.active[slot] = [*(current if c.multi_valued else []), fact]
        action = "supersede" if closed else "add"
        self._note(action, slot, c, fact_id=fact.id, closed=tuple(f.id for f in closed))

    def _retract(self, c: Candidate, slot: Slot) -> None:
        current = self.active.get(slot, [])
        # A stated value closes only the facts that carry it ("I don't live in Berlin any
        # more" does not close "I live in Munich"); without one the whole slot closes.
        named = c.multi_valued or bool(_folded(c.value or ""))
        targets = [f for f in current if _carries(f, c)] if named else list(current)
        if not targets:
            self._note("noop", slot, c, reason="nothing_to_retract")
            return
        for old in targets:
            self._close(old, "retracted", reason="retracted_by_user")
        self.active[slot] = [f for f in current if f not in targets]
        self._note("retract", slot, c, closed=tuple(f.id for f in targets))

    def _close(
        self,
        old: Fact,
        status: FactStatus,
        *,
        superseded_by: str | None = None,
        reason: str | None = None,
    ) -> None:
        fresh = next((i for i, f in enumerate(self.plan.new) if f.id == old.id), None)
        if fresh is not None:  # written by this very plan: store it already closed
            self.plan.new[fresh] = old.model_copy(
                update={
                    "status": status,
                    "valid_to": self.now,
                    "superseded_by": superseded_by,
                    "reason": reason,
                }
            )
            return
        self._change(old, status, valid_to=self.now, superseded_by=superseded_by, reason=reason)

    def _change(
        self,
        fact: Fact,
        status: FactStatus,
        *,
        valid_to: datetime | None = None,
        superseded_by: str | None = None,
        reason: str | None = None,
        confidence: float | None = None,
    ) -> None:
        fresh = next((i for i, f in enumerate(self.plan.new) if f.id == fact.id), None)
        if fresh is not None and confidence is not None:
            self.plan.new[fresh] = fact.model_copy(update={"confidence": confidence})
            return
        earlier = self.plan.changes.get(fact.id)
        self.plan.changes[fact.id] = FactChange(
            fact_id=fact.id,
            status=status,
            valid_to=valid_to if valid_to is not None else (earlier.valid_to if earlier else None),
            superseded_by=superseded_by,
            reason=reason,
            confidence=confidence
            if confidence is not None
            else (earlier.confidence if earlier else None),
            expected_revision=fact.revision,
        )

    def _fact(
        self, c: Candidate, slot: Slot, *, status: FactStatus, reason: str | None = None
    ) -> Fact:
        source = self.source
        if c.evidence:
            source = source.model_copy(update={"message_ids": c.evidence})
        return Fact(
            id=self.fact_ids[self.index] if self.fact_ids is not None else self.new_id(),
            namespace=self.namespace,
            subject=slot[0],
            attribute=slot[1],
            text=c.text,
            category=c.category,
            confidence=c.confidence,
            importance=c.importance,
            status=status,
            valid_from=self.now,
            recorded_at=self.now,
            source=source,
            reason=reason,
        )

    def _note(
        self,
        action: str,
        slot: Slot,
        c: Candidate,
        *,
        fact_id: str | None = None,
        closed: tuple[str, ...] = (),
        reason: str | None = None,
    ) -> None:
        self.plan.decisions.append(
            MemoryDecision.model_validate(
                {
                    "action": action,
                    "slot": slot,
                    "text": c.text,
                    "fact_id": fact_id,
                    "closed_ids": closed,
                    "reason": reason,
                    "evidence": c.evidence,
                }
            )
        )


def plan_writes(
    namespace: Namespace,
    screened: Sequence[Screened],
    active: Sequence[Fact],
    *,
    now: datetime,
    source: FactSource,
    min_confidence: float = 0.0,
    new_id: Callable[[], str] = new_fact_id,
    fact_ids: Sequence[str] | None = None,
) -> WritePlan:
    """Plan the write for `screened` candidates, in order, against the `active` facts.

    Args:
        namespace: Where the new facts go.
        screened: Candidates with their gate / quarantine verdicts, in conversation order
            (a later value for a slot wins; the earlier one is kept as history).
        active: The namespace's active facts (at least those in the candidates' slots).
        now: The write's time: ``valid_from`` of new facts, ``valid_to`` of closed ones.
        source: Provenance for new facts (each candidate's evidence ids replace its
            ``message_ids``).
        min_confidence: Stored candidates below this are rejected (``low_confidence``).
        new_id: Fact id factory.
        fact_ids: Instead of `new_id`, the id of the fact each candidate would create, by
            index (deterministic ids for idempotent replays, `derived_fact_id`).
    """
    by_slot: dict[Slot, list[Fact]] = {}
    for fact in active:
        if fact.status == "active":
            by_slot.setdefault(fact.slot, []).append(fact)
    if fact_ids is not None and len(fact_ids) != len(screened):
        raise ValueError("fact_ids needs one id per screened candidate")
    planner = _Planner(namespace, now, source, min_confidence, new_id, by_slot, fact_ids)
    for index, item in enumerate(screened):
        planner.index = index
        planner.decide(item)
    return planner.plan
