"""What long-term memory stores: facts, their slots and history, and the decisions about them.

A `Fact` is one statement about a user (or an agent's user) that should outlive threads:
"prefers dark mode", "lives in Munich", "我叫李雷". Facts live in a *namespace*, a tuple of
strings (`namespace_for`: ``("users", user_id, "agents", agent)``; a fact shared by every agent
of a user lives one level up, ``("users", user_id)``).

Every fact fills a *slot*, ``(subject, attribute)``: ``("user", "home_city")``. A newer value
for the same slot *supersedes* the old fact: the old one gets ``valid_to`` and
``superseded_by`` and keeps its text, so "as of" reads and history still see it. Facts in other
slots of the same subject are never touched. A retraction closes a slot without a successor.
Nothing is physically deleted except by an explicit `forget`.

Extractors propose `Candidate`s; the scope gate, the quarantine and the supersession planner
turn them into `MemoryDecision`s (what happened, and why), and the backend stores `Fact`s.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from foldwise.errors import MemoryInputError

__all__ = [
    "MAX_FACT_CHARS",
    "MAX_NAMESPACE_DEPTH",
    "Candidate",
    "DecisionAction",
    "Fact",
    "FactCategory",
    "FactSource",
    "FactStatus",
    "MemoryDecision",
    "Namespace",
    "Slot",
    "check_namespace",
    "check_text",
    "namespace_for",
    "normalize_slot_part",
    "utcnow",
]

Namespace = tuple[str, ...]
"""Where facts live: ``("users", "alice", "agents", "agent")``."""

Slot = tuple[str, str]
"""``(subject, attribute)``: what a fact is about; a newer value for a slot supersedes it."""

FactStatus = Literal["active", "superseded", "retracted", "quarantined"]
FactCategory = Literal[
    "identity", "preference", "location", "work", "tooling", "language", "background", "other"
]
DecisionAction = Literal[
    "add",  # a new slot, or a new fact in a multi-valued slot
    "supersede",  # a new value for an existing slot; the old fact is closed
    "retract",  # the slot is closed with no successor
    "reinforce",  # the same value again: confidence up, no new fact
    "noop",  # nothing worth remembering
    "rejected",  # the scope gate refused it (task-scoped, transactional, not about the user)
    "quarantined",  # it tries to act on the agent; stored for review, never injected
    "deduplicated",  # the same update was applied before (idempotent replays)
]

MAX_FACT_CHARS = 2000
"""Longer fact texts are refused (`MemoryInputError`): memory holds facts, not documents."""

MAX_NAMESPACE_DEPTH = 8
_NAMESPACE_PART = re.compile(r"^[A-Za-z0-9_.@:+-]{1,128}$")
_SURROGATE = re.compile("[\ud800-\udfff]")


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (every memory timestamp is)."""
    return datetime.now(UTC)


class FactSource(BaseModel):
    """Where a fact came from: the thread, the messages that state it, the run."""

    model_config = ConfigDict(frozen=True)

    thread_id: str | None = None
    message_ids: tuple[str, ...] = ()
    run_id: str | None = None
    via: str = "api"
    """What wrote it: ``rules``, ``model``, ``tool``, ``api``, ``cli``, ``import``."""


class Fact(BaseModel):
    """One remembered statement, with its slot, validity interval and provenance."""

    model_config = ConfigDict(frozen=True)

    id: str
    namespace: Namespace
    subject: str = "user"
    attribute: str
    text: str
    category: FactCategory = "other"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    """How much a profile wants it (identity and standing preferences rank first)."""
    status: FactStatus = "active"
    valid_from: datetime
    valid_to: datetime | None = None
    recorded_at: datetime
    superseded_by: str | None = None
    source: FactSource = FactSource()
    revision: int = 1
    reason: str | None = None
    """Why it is not active: a gate or quarantine reason code, or the retraction's reason."""

    @property
    def slot(self) -> Slot:
        """``(subject, attribute)``."""
        return (self.subject, self.attribute)

    def current_at(self, when: datetime) -> bool:
        """Whether the fact was the valid value of its slot at `when` (quarantine never is)."""
        if self.status == "quarantined":
            return False
        return self.valid_from <= when and (self.valid_to is None or when < self.valid_to)


class Candidate(BaseModel):
    """What an extractor proposes, before the gate, the quarantine and supersession decide.

    ``scope``/``durability``/``authority`` are the extractor's labels; the gate trusts only
    ``user`` + ``durable`` + ``descriptive`` and re-checks the text itself (fail-closed).
    """

    model_config = ConfigDict(frozen=True)

    action: Literal["add", "supersede", "retract", "reinforce", "noop"] = "add"
    subject: str = "user"
    attribute: str
    text: str
    category: FactCategory = "other"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    scope: Literal["user", "task", "session", "agent"] = "user"
    durability: Literal["durable", "transient"] = "durable"
    authority: Literal["descriptive", "directive", "grant"] = "descriptive"
    evidence: tuple[str, ...] = ()
    """Ids of the messages that state it."""
    value: str | None = None
    """The slot's value as stated ("trail running" in "I like trail running"): a retraction
    or a repeat in a multi-valued slot matches the facts that carry it."""
    multi_valued: bool = False
    """The slot holds several facts ("likes": tea, jazz); adding one supersedes nothing."""


class MemoryDecision(BaseModel):
    """What memory did with one candidate (or one API call), and why."""

    model_config = ConfigDict(frozen=True)

    action: DecisionAction
    slot: Slot | None = None
    text: str = ""
    fact_id: str | None = None
    """The fact written, reinforced or quarantined."""
    closed_ids: tuple[str, ...] = ()
    """Facts this decision superseded or retracted."""
    reason: str | None = None
    """A reason code for rejected / quarantined / noop decisions (``task_scoped``, ...)."""
    evidence: tuple[str, ...] = ()


def namespace_for(user_id: str, agent: str | None = "agent") -> Namespace:
    """The namespace of `user_id`'s facts for `agent` (``None``: shared by the user's agents)."""
    namespace = ("users", user_id) if agent is None else ("users", user_id, "agents", agent)
    return check_namespace(namespace)


def check_namespace(namespace: object) -> Namespace:
    """`namespace` as a tuple, or `MemoryInputError` naming the bad part."""
    if isinstance(namespace, str) or not isinstance(namespace, tuple | list):
        raise MemoryInputError("must be a tuple of strings", field="namespace")
    if not 1 <= len(namespace) <= MAX_NAMESPACE_DEPTH:
        raise MemoryInputError(
            f"must have 1 to {MAX_NAMESPACE_DEPTH} parts, got {len(namespace)}", field="namespace"
        )
    for index, part in enumerate(namespace):
        if not isinstance(part, str) or not _NAMESPACE_PART.match(part):
            raise MemoryInputError(
                "each part is 1-128 characters of letters, digits and _.@:+-",
                field=f"namespace[{index}]",
            )
    return tuple(namespace)


def check_text(text: object, *, field: str = "text") -> str:
    """`text` stripped, or `MemoryInputError` (not a string, empty, too long)."""
    if not isinstance(text, str):
        raise MemoryInputError("must be a string", field=field)
    stripped = text.strip()
    if not stripped:
        raise MemoryInputError("must not be empty", field=field)
    if "\x00" in stripped:
        raise MemoryInputError("must not contain NUL characters", field=field)
    if _SURROGATE.search(stripped):
        raise MemoryInputError("must be valid Unicode (it has a lone surrogate)", field=field)
    if len(stripped) > MAX_FACT_CHARS:
        raise MemoryInputError(
            f"is {len(stripped)} characters; the limit is {MAX_FACT_CHARS}", field=field
        )
    return stripped


def normalize_slot_part(value: str) -> str:
    """A slot name in one spelling: NFKC, lower case, spaces and dashes to ``_``."""
    folded = unicodedata.normalize("NFKC", value).strip().lower()
    return re.sub(r"[\s\-]+", "_", folded)[:64] or "_"
