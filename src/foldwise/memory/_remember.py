"""How `MemoryManager` applies a write plan and a conversation slice, idempotently and logged.

`remember_slice_steps` is `MemoryManager.remember`: select → extract → screen → plan → one
backend write → log. With an idempotency ``key`` (the write queue's slice or batch key) the
facts it creates get deterministic ids, ``derived_fact_id(key, candidate index)``, and a
replay whose derived ids already exist is a no-op: every candidate is logged ``deduplicated``
and nothing is written. The backend write is atomic on SQL, so one derived id present means
the whole slice was applied; a worker that crashed between the apply and the queue's
completion therefore re-applies nothing. (A replay re-extracts, so with a model extractor the
candidates may differ; the planner's reinforce-instead-of-twin rule then still keeps one fact
per value.)
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage

from foldwise._steps import Io, Steps
from foldwise._telemetry import AttributeValue, span
from foldwise.errors import FoldwiseError
from foldwise.memory._contracts import FactChange
from foldwise.memory._events import events_of
from foldwise.memory._facts import (
    Candidate,
    Fact,
    FactSource,
    MemoryDecision,
    Namespace,
    check_namespace,
    normalize_slot_part,
    utcnow,
)
from foldwise.memory._plan import WritePlan, plan_writes
from foldwise.memory._select import select_messages

if TYPE_CHECKING:
    from foldwise.memory._manager import MemoryManager

__all__ = ["derived_fact_id", "log_steps", "remember_slice_steps", "write_plan_steps"]

logger = logging.getLogger(__name__)


def derived_fact_id(key: str, index: int) -> str:
    """The id of the fact candidate `index` of the slice `key` creates (``fact_`` + 24 hex)."""
    return "fact_" + hashlib.sha256(f"{key}\x1f{index}".encode()).hexdigest()[:24]


def log_steps(
    manager: MemoryManager,
    namespace: Namespace,
    decisions: Sequence[MemoryDecision],
    *,
    source: FactSource,
    key: str | None,
) -> Steps[None]:
    """Hand `decisions` to the manager's event sink; a failing sink is logged, not raised."""
    if not decisions:
        return
    sink = manager.event_sink
    events = events_of(namespace, decisions, at=utcnow(), source=source, key=key)
    try:
        yield Io.of(sink.record, sink.arecord, events)
    except FoldwiseError as exc:
        logger.warning("memory decisions not logged for %s: %s", namespace, exc)


def write_plan_steps(
    manager: MemoryManager,
    namespace: Namespace,
    plan: WritePlan,
    *,
    source: FactSource | None = None,
    key: str | None = None,
) -> Steps[None]:
    """Store `plan` in one backend write, enforce retention, log its decisions."""
    backend = manager.backend
    if not plan.empty:
        embeddings: list[Sequence[float] | None] = []
        embedder = manager.embedder
        if embedder is not None:
            texts = [f.text for f in plan.new if f.status == "active"]
            vectors = iter(
                (yield Io.of(embedder.embed_documents, embedder.aembed_documents, texts))
                if texts
                else []
            )
            embeddings = [next(vectors) if f.status == "active" else None for f in plan.new]
        yield Io.of(
            backend.write,
            backend.awrite,
            namespace,
            new=plan.new,
            changes=list(plan.changes.values()),
            embeddings=embeddings,
        )
        if any(f.status == "active" for f in plan.new):
            yield from _retain_steps(manager, namespace)
    yield from log_steps(manager, namespace, plan.decisions, source=source or FactSource(), key=key)


def _retain_steps(manager: MemoryManager, namespace: Namespace) -> Steps[None]:
    backend = manager.backend
    active: list[Fact] = yield Io.of(
        backend.list_facts, backend.alist_facts, namespace, status="active"
    )
    excess = len(active) - manager.max_active_facts
    if excess <= 0:
        return
    ranked = sorted(active, key=lambda f: (f.importance, f.confidence, f.recorded_at))
    now = utcnow()
    changes = [
        FactChange(
            fact_id=f.id,
            status="retracted",
            valid_to=now,
            reason="retention",
            expected_revision=f.revision,
        )
        for f in ranked[:excess]
    ]
    yield Io.of(backend.write, backend.awrite, namespace, changes=changes)


def _applied_steps(manager: MemoryManager, namespace: Namespace, ids: list[str]) -> Steps[bool]:
    backend = manager.backend
    for fact_id in ids:
        found = yield Io.of(backend.get, backend.aget, namespace, fact_id)
        if found is not None:
            return True
    return False


def _deduplicated(candidates: Sequence[Candidate], ids: Sequence[str]) -> list[MemoryDecision]:
    return [
        MemoryDecision(
            action="deduplicated",
            slot=(normalize_slot_part(c.subject), normalize_slot_part(c.attribute)),
            text=c.text,
            fact_id=fact_id,
            reason="already_applied",
            evidence=c.evidence,
        )
        for c, fact_id in zip(candidates, ids, strict=True)
    ]


def remember_slice_steps(
    manager: MemoryManager,
    namespace: Namespace,
    messages: Sequence[BaseMessage],
    *,
    source: FactSource | None = None,
    key: str | None = None,
) -> Steps[list[MemoryDecision]]:
    """`MemoryManager.remember_steps` (see the module docstring)."""
    ns = check_namespace(namespace)
    selected = select_messages(messages)
    if not selected:
        return []
    backend = manager.backend
    known = yield Io.of(backend.list_facts, backend.alist_facts, ns, status="active")
    with span("foldwise.memory.extract", _counts(messages=len(selected), known=len(known))) as ex:
        candidates = yield from manager._extract(selected, known)
        ex.set_attribute("foldwise.memory.candidates", len(candidates))
    source = source or FactSource(via=manager.extractor.name)
    ids = None
    if key is not None:
        ids = [derived_fact_id(key, index) for index in range(len(candidates))]
        if (yield from _applied_steps(manager, ns, ids)):
            decisions = _deduplicated(candidates, ids)
            yield from log_steps(manager, ns, decisions, source=source, key=key)
            return decisions
    texts = {m.id: m.text for m in selected}
    screened = [
        manager._screen(c, " ".join(texts.get(i) or "" for i in c.evidence), gate=True)
        for c in candidates
    ]
    plan = plan_writes(
        ns,
        screened,
        known,
        now=utcnow(),
        source=source,
        min_confidence=manager.min_confidence,
        fact_ids=ids,
    )
    with span("foldwise.memory.write", _decision_counts(plan.decisions)):
        yield from write_plan_steps(manager, ns, plan, source=source, key=key)
    return plan.decisions


def _counts(**counts: int) -> dict[str, AttributeValue | None]:
    return {f"foldwise.memory.{name}": value for name, value in counts.items()}


def _decision_counts(decisions: Sequence[MemoryDecision]) -> dict[str, AttributeValue | None]:
    """Span attributes: how many decisions of each action (ids and counts only)."""
    actions = Counter(str(d.action) for d in decisions)
    return _counts(decisions=len(decisions), **{f"action.{a}": n for a, n in actions.items()})
