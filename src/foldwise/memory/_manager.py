"""`MemoryManager`: every memory decision, over any backend and any extractor.

The manager is the only place that decides: it selects the messages worth reading, asks the
extractor (falling back from the model to the rules when the model fails), screens each
candidate through the scope gate and the quarantine, plans supersession per slot, and hands the
result to the backend as one write. Backends store; extractors propose (`_contracts`).

Every public method is written once as a step generator (`foldwise._steps`) and has a sync and
an ``a``-prefixed async twin, so the async path never calls a sync backend or model.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args

from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage, HumanMessage

from foldwise._steps import Io, Steps, async_method, sync_method
from foldwise.errors import ExtractionError, FactNotFoundError, MemoryInputError
from foldwise.memory._api_checks import (
    REJECTED,
    api_candidate,
    check_fact_id,
    check_k,
    note_slot,
    was_current,
)
from foldwise.memory._contracts import Extractor, FactChange, MemoryBackend, MemoryCapabilities
from foldwise.memory._events import MemoryEvent, MemoryEventSink, check_limit, default_sink
from foldwise.memory._facts import (
    Candidate,
    Fact,
    FactCategory,
    FactSource,
    FactStatus,
    MemoryDecision,
    Namespace,
    check_namespace,
    check_text,
    normalize_slot_part,
    utcnow,
)
from foldwise.memory._gate import screen
from foldwise.memory._plan import Screened, WritePlan, plan_writes
from foldwise.memory._quarantine import quarantine_reason
from foldwise.memory._remember import remember_slice_steps, write_plan_steps
from foldwise.memory._rules import RulesExtractor, multi_valued_slot
from foldwise.memory._search import fuse_ranked

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from foldwise.config import FoldwiseConfig

__all__ = ["MemoryManager"]

_FactList = list[Fact]
_STATUSES: tuple[str, ...] = get_args(FactStatus)
_VECTOR_POOL = 4


class MemoryManager:
    """Long-term memory over a `MemoryBackend`: add, search, supersede, retract, remember.

    Args:
        backend: Where facts live (`open_backend`).
        extractor: Who proposes facts in `remember` (default: the offline rules extractor).
        fallback: Used when `extractor` raises `ExtractionError` (default: the rules
            extractor when `extractor` is a model; `None` for no fallback).
        embedder: Optional LangChain `Embeddings`; with a backend that stores vectors, search
            fuses lexical and vector ranks (reciprocal-rank fusion).
        min_confidence: Extracted facts below this are rejected (``low_confidence``).
        max_active_facts: Past this, the least important, least confident, oldest active facts
            are retracted (reason ``retention``).
        event_sink: Where decisions are logged (default: ``memory_events`` on SQL, else an
            in-process list).
    """

    def __init__(
        self,
        backend: MemoryBackend,
        *,
        extractor: Extractor | None = None,
        fallback: Extractor | None = None,
        embedder: Embeddings | None = None,
        min_confidence: float = 0.5,
        max_active_facts: int = 1000,
        event_sink: MemoryEventSink | None = None,
    ) -> None:
        self.backend = backend
        self.extractor: Extractor = extractor or RulesExtractor()
        self.fallback = fallback
        self.embedder = embedder if backend.capabilities.vector else None
        self.min_confidence = min_confidence
        self.max_active_facts = max_active_facts
        self.event_sink = event_sink if event_sink is not None else default_sink(backend)

    @classmethod
    def from_config(
        cls, config: FoldwiseConfig, *, store: BaseStore | None = None, model: Any = None
    ) -> MemoryManager:
        """A manager over the configured backend (``memory.url``, else ``storage.url``)."""
        from foldwise.memory._from_config import manager_parts

        return cls(**manager_parts(config, store=store, model=model))

    @property
    def capabilities(self) -> MemoryCapabilities:
        """What the backend can do."""
        return self.backend.capabilities

    def setup(self) -> None:
        """Create the backend's tables (idempotent)."""
        self.backend.setup()

    async def asetup(self) -> None:
        """Async `setup`."""
        await self.backend.asetup()

    def close(self) -> None:
        """Release the backend's connections."""
        self.backend.close()

    async def aclose(self) -> None:
        """Async `close`."""
        await self.backend.aclose()

    # --- reads ---------------------------------------------------------------------------------

    def get_steps(self, namespace: Namespace, fact_id: str) -> Steps[Fact]:
        """The fact, or `FactNotFoundError` (another namespace's facts are never found)."""
        ns, fid = check_namespace(namespace), check_fact_id(fact_id)
        fact: Fact | None = yield Io.of(self.backend.get, self.backend.aget, ns, fid)
        if fact is None:
            raise FactNotFoundError(fid)
        return fact

    def list_steps(
        self, namespace: Namespace, *, status: FactStatus | None = None, limit: int | None = None
    ) -> Steps[_FactList]:
        """Facts in the namespace, oldest first, optionally of one status; at most `limit`."""
        ns = check_namespace(namespace)
        if status is not None and status not in _STATUSES:
            raise MemoryInputError(f"must be one of {', '.join(_STATUSES)}", field="status")
        facts: _FactList = yield Io.of(
            self.backend.list_facts, self.backend.alist_facts, ns, status=status, limit=limit
        )
        return facts

    def quarantined_steps(self, namespace: Namespace) -> Steps[_FactList]:
        """Facts held for review (never injected, never searched)."""
        return (yield from self.list_steps(namespace, status="quarantined"))

    def history_steps(self, namespace: Namespace, fact_id: str) -> Steps[_FactList]:
        """Every version of the fact's slot, oldest first (quarantined ones excluded)."""
        fact = yield from self.get_steps(namespace, fact_id)
        versions = yield Io.of(
            self.backend.list_facts, self.backend.alist_facts, fact.namespace, slot=fact.slot
        )
        kept = [f for f in versions if was_current(f) or f.id == fact.id]
        return sorted(kept, key=lambda f: (f.valid_from, f.recorded_at, f.id))

    def search_steps(
        self, namespace: Namespace, query: str, *, k: int = 5, as_of: datetime | None = None
    ) -> Steps[_FactList]:
        """The `k` best facts for `query`: active ones, or those current at `as_of`."""
        ns, text, k = check_namespace(namespace), check_text(query, field="query"), check_k(k)
        statuses: tuple[FactStatus, ...] = ("active",)
        if as_of is not None:
            statuses = ("active", "superseded", "retracted")
        pool = k * _VECTOR_POOL if self.embedder is not None else k
        lexical = yield Io.of(
            self.backend.search,
            self.backend.asearch,
            ns,
            text,
            k=pool,
            statuses=statuses,
            as_of=as_of,
        )
        if self.embedder is None:
            return [hit.fact for hit in lexical[:k]]
        vector_query = yield Io.of(self.embedder.embed_query, self.embedder.aembed_query, text)
        semantic = yield Io.of(
            self.backend.search_vector,
            self.backend.asearch_vector,
            ns,
            vector_query,
            k=pool,
            statuses=statuses,
            as_of=as_of,
        )
        return fuse_ranked([lexical, semantic])[:k]

    # --- writes --------------------------------------------------------------------------------

    def _write(self, namespace: Namespace, plan: WritePlan) -> Steps[None]:
        yield from write_plan_steps(self, namespace, plan)

    @staticmethod
    def _screen(candidate: Candidate, evidence: str, *, gate: bool) -> Screened:
        """The quarantine (and with `gate`, the scope gate) on a candidate and its evidence."""
        if not gate:
            return Screened(candidate, quarantined=quarantine_reason(candidate.text))
        verdict = screen(candidate, evidence_text=evidence)
        if verdict is None:
            return Screened(candidate)
        kind, code = verdict
        if kind == "quarantined":
            return Screened(candidate, quarantined=code)
        return Screened(candidate, rejected=code)

    @staticmethod
    def _slot_for(text: str) -> Candidate | None:
        """The slot the rules extractor reads in `text` (one statement), if exactly one."""
        found = RulesExtractor().extract([HumanMessage(content=text, id="add")])
        stored = [c for c in found if c.action in ("add", "supersede", "reinforce")]
        return stored[0] if len(stored) == 1 else None

    def add_steps(
        self,
        namespace: Namespace,
        text: str,
        *,
        subject: str | None = None,
        attribute: str | None = None,
        category: FactCategory | None = None,
        confidence: float = 0.9,
        source: FactSource | None = None,
        gate: bool = False,
    ) -> Steps[Fact]:
        """Store `text` as a fact; a new value for its slot supersedes the old one.

        The slot is ``(subject, attribute)`` when given, else the one the rules extractor
        reads in the text, else a note slot of its own. Text that tries to act on the agent is
        stored ``quarantined`` (returned, never injected). With ``gate`` (tool writes) the scope
        gate applies too and a refused text raises `MemoryInputError` naming its reason.
        """
        ns, body = check_namespace(namespace), check_text(text)
        read = self._slot_for(body) if attribute is None else None
        candidate = api_candidate(
            subject=subject or (read.subject if read else "user"),
            attribute=attribute or (read.attribute if read else note_slot(body)),
            text=body,
            category=category or (read.category if read else "other"),
            confidence=confidence,
            importance=read.importance if read else 0.5,
            multi_valued=read.multi_valued
            if read
            else attribute is None or multi_valued_slot(normalize_slot_part(attribute)),
        )
        screened = self._screen(candidate, body, gate=gate)
        if screened.rejected:
            raise MemoryInputError(f"not stored ({screened.rejected})", field="text")
        active = yield Io.of(self.backend.list_facts, self.backend.alist_facts, ns, status="active")
        plan = plan_writes(ns, [screened], active, now=utcnow(), source=source or FactSource())
        yield from self._write(ns, plan)
        (decision,) = plan.decisions
        return (yield from self.get_steps(ns, decision.fact_id or ""))

    def update_steps(
        self,
        namespace: Namespace,
        fact_id: str,
        text: str,
        *,
        expected_revision: int | None = None,
        gate: bool = False,
    ) -> Steps[Fact]:
        """Replace an active fact's text: a new fact in its slot supersedes it (history kept).

        With `expected_revision`, a fact changed since it was read raises
        `RevisionConflictError` and nothing is written. With ``gate`` (tool writes) the scope
        gate applies as in `add`: a refused text raises `MemoryInputError` naming its reason.
        """
        old = yield from self.get_steps(namespace, fact_id)
        body = check_text(text)
        if old.status != "active":
            raise MemoryInputError(f"fact {old.id!r} is {old.status}, not active", field="fact_id")
        candidate = Candidate(
            subject=old.subject,
            attribute=old.attribute,
            text=body,
            category=old.category,
            confidence=old.confidence,
            importance=old.importance,
        )
        screened = self._screen(candidate, body, gate=gate)
        if screened.rejected:
            raise MemoryInputError(f"not stored ({screened.rejected})", field="text")
        pinned = (
            old
            if expected_revision is None
            else old.model_copy(update={"revision": expected_revision})
        )
        plan = plan_writes(
            old.namespace, [screened], [pinned], now=utcnow(), source=FactSource(via="api")
        )
        yield from self._write(old.namespace, plan)
        (decision,) = plan.decisions
        return (yield from self.get_steps(old.namespace, decision.fact_id or old.id))

    def _set_status(
        self, namespace: Namespace, fact_id: str, status: FactStatus, reason: str, *, closes: bool
    ) -> Steps[Fact]:
        fact = yield from self.get_steps(namespace, fact_id)
        change = FactChange(
            fact_id=fact.id,
            status=status,
            valid_to=utcnow() if closes else None,
            reason=reason,
            expected_revision=fact.revision,
        )
        yield Io.of(self.backend.write, self.backend.awrite, fact.namespace, changes=[change])
        return (yield from self.get_steps(fact.namespace, fact.id))

    def retract_steps(
        self, namespace: Namespace, fact_id: str, reason: str = "retracted"
    ) -> Steps[Fact]:
        """Close an active fact's validity with no successor; history keeps it."""
        fact = yield from self.get_steps(namespace, fact_id)
        if fact.status != "active":
            raise MemoryInputError(
                f"fact {fact.id!r} is {fact.status}, not active", field="fact_id"
            )
        return (yield from self._set_status(namespace, fact_id, "retracted", reason, closes=True))

    def forget_steps(self, namespace: Namespace, fact_id: str) -> Steps[int]:
        """Delete the fact and every version of its slot for real; return how many."""
        versions = yield from self.history_steps(namespace, fact_id)
        deleted = 0
        for version in versions:
            gone = yield Io.of(
                self.backend.delete, self.backend.adelete, version.namespace, version.id
            )
            deleted += int(gone)
        return deleted

    def approve_steps(self, namespace: Namespace, fact_id: str) -> Steps[Fact]:
        """Release a quarantined fact: it becomes active and supersedes its slot's value."""
        held = yield from self.get_steps(namespace, fact_id)
        if held.status != "quarantined":
            raise MemoryInputError(f"fact {held.id!r} is not quarantined", field="fact_id")
        current = yield Io.of(
            self.backend.list_facts,
            self.backend.alist_facts,
            held.namespace,
            status="active",
            slot=held.slot,
        )
        now = utcnow()
        changes = [
            FactChange(
                fact_id=held.id,
                status="active",
                valid_from=now,
                reason="approved",
                expected_revision=held.revision,
            ),
            *(
                FactChange(
                    fact_id=f.id,
                    status="superseded",
                    valid_to=now,
                    superseded_by=held.id,
                    expected_revision=f.revision,
                )
                for f in current
                if not multi_valued_slot(held.attribute)
            ),
        ]
        yield Io.of(self.backend.write, self.backend.awrite, held.namespace, changes=changes)
        return (yield from self.get_steps(held.namespace, held.id))

    def reject_steps(self, namespace: Namespace, fact_id: str) -> Steps[Fact]:
        """Refuse a quarantined fact: it stays, retracted, for the record."""
        held = yield from self.get_steps(namespace, fact_id)
        if held.status != "quarantined":
            raise MemoryInputError(f"fact {held.id!r} is not quarantined", field="fact_id")
        change = FactChange(  # closed where it starts: never current, for any "as of"
            fact_id=held.id,
            status="retracted",
            valid_to=held.valid_from,
            reason=REJECTED,
            expected_revision=held.revision,
        )
        yield Io.of(self.backend.write, self.backend.awrite, held.namespace, changes=[change])
        return (yield from self.get_steps(held.namespace, held.id))

    # --- extraction ----------------------------------------------------------------------------

    def _extract(
        self, messages: Sequence[BaseMessage], known: Sequence[Fact]
    ) -> Steps[list[Candidate]]:
        try:
            return (yield from self.extractor.extract_steps(messages, known=known))
        except ExtractionError:
            if self.fallback is None:
                raise
            return (yield from self.fallback.extract_steps(messages, known=known))

    def remember_steps(
        self,
        namespace: Namespace,
        messages: Sequence[BaseMessage],
        *,
        source: FactSource | None = None,
        key: str | None = None,
    ) -> Steps[list[MemoryDecision]]:
        """Extract, screen and apply what `messages` say about the user; return the decisions.

        Only the user's own inputs and final answers are read. A failing extractor (after its
        fallback) raises `ExtractionError` and nothing is written. With an idempotency `key`
        (the write queue's), created facts get ids derived from it and a replay of an applied
        slice writes nothing (decisions ``deduplicated``; see `foldwise.memory._remember`).
        """
        return (yield from remember_slice_steps(self, namespace, messages, source=source, key=key))

    def events_steps(self, namespace: Namespace, *, limit: int = 50) -> Steps[list[MemoryEvent]]:
        """The namespace's newest logged decisions, newest first (``foldwise memory log``)."""
        ns, sink = check_namespace(namespace), self.event_sink
        found: list[MemoryEvent] = yield Io.of(
            sink.list_events, sink.alist_events, ns, limit=check_limit(limit)
        )
        return found

    get = sync_method(get_steps)
    aget = async_method(get_steps)
    search = sync_method(search_steps)
    asearch = async_method(search_steps)
    add = sync_method(add_steps)
    aadd = async_method(add_steps)
    update = sync_method(update_steps)
    aupdate = async_method(update_steps)
    retract = sync_method(retract_steps)
    aretract = async_method(retract_steps)
    forget = sync_method(forget_steps)
    aforget = async_method(forget_steps)
    history = sync_method(history_steps)
    ahistory = async_method(history_steps)
    quarantined = sync_method(quarantined_steps)
    aquarantined = async_method(quarantined_steps)
    approve = sync_method(approve_steps)
    aapprove = async_method(approve_steps)
    reject = sync_method(reject_steps)
    areject = async_method(reject_steps)
    remember = sync_method(remember_steps)
    aremember = async_method(remember_steps)
    events = sync_method(events_steps)
    aevents = async_method(events_steps)
    list = sync_method(list_steps)
    alist = async_method(list_steps)
