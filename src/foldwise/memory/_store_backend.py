"""`StoreMemoryBackend`: facts kept in any LangGraph `BaseStore`, searched by an in-process index.

Layout: a fact of namespace ``("users", "alice")`` is the item ``(ROOT, "users", "alice")`` /
``fact_id``, its value the fact's JSON plus ``"embedding"`` when one was given. LangGraph
refuses ``.`` in namespace labels, which fact namespaces allow, so each label is escaped
(``.`` → ``%2E``; ``%`` itself never occurs in a fact namespace, so the encoding is one-to-one).
Listing a namespace keeps only items whose namespace is exactly the fact namespace's (a store
search by prefix also returns the deeper namespaces).

Written once as step generators (`foldwise._steps`): every store call is an `Io` with the
store's sync and async methods, so the async twins never call a sync store method (an async-only
store such as `AsyncPostgresStore` on its loop works).

Search: a store has no full-text index (its `search` is vector-or-recency), so the adapter
keeps a `BM25Index` per namespace, built from the store on the first search and updated by this
adapter's own writes. Writes by *another* process or adapter instance are not seen until
`invalidate` (or a new adapter); part 2's single memory worker writes through one adapter.

Atomicity: a `BaseStore` has no transactions (``capabilities.transactions`` is False). A write
checks everything first (missing facts, revisions, duplicate ids, ``superseded_by`` targets) and
stores nothing when a check fails; then it stores the new facts *before* the changes that point
at them (one `batch`), so a crash in between leaves a new fact next to a still-active old one,
never a fact closed in favour of a successor that does not exist. Revision checks are
check-then-put: they stop stale writers that read an old revision, but two writers racing within
the same instant are not serialized (the store has no compare-and-set).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore, Item, PutOp
from langgraph.store.memory import InMemoryStore

from foldwise._steps import Io, Steps, async_method, sync_method
from foldwise.errors import MemoryInputError
from foldwise.memory._backend_common import (
    WriteArgs,
    check_change,
    check_search,
    check_write,
    rank,
    similarity,
    unit_vector,
    visible,
)
from foldwise.memory._bm25 import BM25Index
from foldwise.memory._contracts import FactChange, MemoryCapabilities, ScoredFact
from foldwise.memory._facts import Fact, FactStatus, Namespace, Slot, check_namespace
from foldwise.memory._terms import index_terms, query_terms

__all__ = ["ROOT", "StoreMemoryBackend"]

ROOT = "foldwise_memory"
"""The first label of every memory item in the store."""

_PAGE = 500


def store_namespace(namespace: Namespace) -> tuple[str, ...]:
    """The store namespace holding the facts of `namespace`."""
    return (ROOT, *(part.replace(".", "%2E") for part in namespace))


@dataclass
class _Cache:
    """One namespace's facts, vectors and BM25 index, as this adapter last saw them."""

    facts: dict[str, Fact] = field(default_factory=dict)
    vectors: dict[str, tuple[float, ...]] = field(default_factory=dict)
    index: BM25Index = field(default_factory=BM25Index)

    def put(self, fact: Fact, vector: Sequence[float] | None, *, reindex: bool) -> None:
        self.facts[fact.id] = fact
        if vector is not None:
            self.vectors[fact.id] = tuple(vector)
        if reindex:
            self.index.add(fact.id, index_terms(fact.text))

    def drop(self, fact_id: str) -> None:
        self.facts.pop(fact_id, None)
        self.vectors.pop(fact_id, None)
        self.index.remove(fact_id)


def _decode(item: Item) -> tuple[Fact, tuple[float, ...] | None]:
    value = dict(item.value)
    vector = value.pop("embedding", None)
    return Fact.model_validate(value), None if vector is None else tuple(vector)


def _encode(fact: Fact, vector: Sequence[float] | None) -> dict[str, Any]:
    value = fact.model_dump(mode="json")
    if vector is not None:
        value["embedding"] = list(vector)
    return value


class StoreMemoryBackend:
    """A `MemoryBackend` over a LangGraph `BaseStore` (see the module docstring).

    Args:
        store: Any `BaseStore`; `InMemoryStore` when omitted (``memory://``).
    """

    capabilities = MemoryCapabilities(search=True, vector=True, transactions=False)

    def __init__(self, store: BaseStore | None = None) -> None:
        self.store: BaseStore = InMemoryStore() if store is None else store
        self._caches: dict[tuple[str, ...], _Cache] = {}
        self._generations: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StoreMemoryBackend({type(self.store).__name__})"

    def setup(self) -> None:
        """Nothing to create: the store is owned (and set up) by the caller."""

    async def asetup(self) -> None:
        """Nothing to create: the store is owned (and set up) by the caller."""

    def close(self) -> None:
        """Forget the search indexes (the store stays open: the caller owns it)."""
        self.invalidate()

    async def aclose(self) -> None:
        """Forget the search indexes (the store stays open: the caller owns it)."""
        self.invalidate()

    def invalidate(self, namespace: Namespace | None = None) -> None:
        """Drop the search index of `namespace` (all when `None`); the next search rebuilds it."""
        with self._lock:
            if namespace is None:
                self._caches.clear()
                self._generations.clear()
            else:
                where = store_namespace(check_namespace(namespace))
                self._caches.pop(where, None)
                self._bump(where)

    def _bump(self, where: tuple[str, ...]) -> None:
        self._generations[where] = self._generations.get(where, 0) + 1

    # store access ----------------------------------------------------------------------------

    def _item_steps(
        self, where: tuple[str, ...], fact_id: str
    ) -> Steps[tuple[Fact, tuple[float, ...] | None] | None]:
        item = yield Io.of(self.store.get, self.store.aget, where, fact_id)
        return None if item is None else _decode(item)

    def _load_steps(
        self, where: tuple[str, ...]
    ) -> Steps[list[tuple[Fact, tuple[float, ...] | None]]]:
        loaded: list[tuple[Fact, tuple[float, ...] | None]] = []
        offset = 0
        while True:
            page = yield Io.of(
                self.store.search, self.store.asearch, where, limit=_PAGE, offset=offset
            )
            loaded.extend(_decode(item) for item in page if tuple(item.namespace) == where)
            if len(page) < _PAGE:
                return loaded
            offset += _PAGE

    def _cache_steps(self, where: tuple[str, ...]) -> Steps[_Cache]:
        with self._lock:
            cache = self._caches.get(where)
            generation = self._generations.get(where, 0)
        if cache is not None:
            return cache
        cache = _Cache()
        for fact, vector in (yield from self._load_steps(where)):
            cache.put(fact, vector, reindex=True)
        with self._lock:
            # A write that landed while we read would be missing: keep the index only if none did.
            if self._generations.get(where, 0) == generation:
                self._caches.setdefault(where, cache)
                return self._caches[where]
        return cache

    # writes ----------------------------------------------------------------------------------

    def write_steps(
        self,
        namespace: Namespace,
        *,
        new: Sequence[Fact] = (),
        changes: Sequence[FactChange] = (),
        embeddings: Sequence[Sequence[float] | None] = (),
    ) -> Steps[None]:
        """Check everything, then store new facts before the changes (see the module docstring)."""
        args = check_write(namespace, new, changes, embeddings)
        if not args.new and not args.changes:
            return
        where = store_namespace(args.namespace)
        updated = yield from self._check_changes_steps(where, args)
        for index, fact in enumerate(args.new):
            if (yield from self._item_steps(where, fact.id)) is not None:
                raise MemoryInputError(
                    f"fact id {fact.id!r} already exists", field=f"new[{index}].id"
                )
        ops = [
            PutOp(where, fact.id, _encode(fact, args.embedding(i)), index=False)
            for i, fact in enumerate(args.new)
        ]
        ops += [
            PutOp(where, fact.id, _encode(fact, vector), index=False)
            for fact, vector in updated.values()
        ]
        yield Io.of(self.store.batch, self.store.abatch, ops)
        with self._lock:
            self._bump(where)
            cache = self._caches.get(where)
            if cache is not None:
                for index, fact in enumerate(args.new):
                    cache.put(fact, args.embedding(index), reindex=True)
                for fact, _vector in updated.values():
                    cache.put(fact, None, reindex=False)

    def _check_changes_steps(
        self, where: tuple[str, ...], args: WriteArgs
    ) -> Steps[dict[str, tuple[Fact, tuple[float, ...] | None]]]:
        new_ids = args.new_ids()
        updated: dict[str, tuple[Fact, tuple[float, ...] | None]] = {}
        for change in args.changes:
            stored = updated.get(change.fact_id) or (
                yield from self._item_steps(where, change.fact_id)
            )
            known = set(new_ids)
            target = change.superseded_by
            if target is not None and target not in known:
                found = target in updated or (yield from self._item_steps(where, target))
                if found:
                    known.add(target)
            fact = check_change(change, None if stored is None else stored[0], known)
            assert stored is not None  # check_change raised otherwise
            updated[change.fact_id] = (fact, stored[1])
        return updated

    write = sync_method(write_steps)
    awrite = async_method(write_steps)

    def delete_steps(self, namespace: Namespace, fact_id: str) -> Steps[bool]:
        """Delete one fact for real (an explicit forget); `False` if it was not there."""
        where = store_namespace(check_namespace(namespace))
        if (yield from self._item_steps(where, fact_id)) is None:
            return False
        yield Io.of(self.store.delete, self.store.adelete, where, fact_id)
        with self._lock:
            self._bump(where)
            cache = self._caches.get(where)
            if cache is not None:
                cache.drop(fact_id)
        return True

    delete = sync_method(delete_steps)
    adelete = async_method(delete_steps)

    # reads -----------------------------------------------------------------------------------

    def get_steps(self, namespace: Namespace, fact_id: str) -> Steps[Fact | None]:
        """The fact with this id in this namespace, or `None`."""
        found = yield from self._item_steps(store_namespace(check_namespace(namespace)), fact_id)
        return None if found is None else found[0]

    get = sync_method(get_steps)
    aget = async_method(get_steps)

    def list_facts_steps(
        self,
        namespace: Namespace,
        *,
        status: FactStatus | None = None,
        slot: Slot | None = None,
        limit: int | None = None,
    ) -> Steps[list[Fact]]:
        """The namespace's facts, oldest recorded first, optionally of one status or slot."""
        where = store_namespace(check_namespace(namespace))
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise MemoryInputError("must be a non-negative integer", field="limit")
        facts = [
            fact
            for fact, _vector in (yield from self._load_steps(where))
            if (status is None or fact.status == status)
            and (slot is None or fact.slot == tuple(slot))
        ]
        facts.sort(key=lambda fact: (fact.recorded_at, fact.id))
        return facts if limit is None else facts[:limit]

    list_facts = sync_method(list_facts_steps)
    alist_facts = async_method(list_facts_steps)

    def search_steps(
        self,
        namespace: Namespace,
        query: str,
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> Steps[list[ScoredFact]]:
        """The `k` best lexical matches for `query` (BM25 over `_terms` terms)."""
        args = check_search(namespace, k, statuses, as_of)
        if not isinstance(query, str):
            raise MemoryInputError("must be a string", field="query")
        terms = query_terms(query)
        if not terms or not args.statuses:
            return []
        cache = yield from self._cache_steps(store_namespace(args.namespace))
        with self._lock:
            hits = [
                ScoredFact(fact=cache.facts[fact_id], score=score)
                for fact_id, score in cache.index.scores(terms).items()
                if visible(cache.facts[fact_id], args)
            ]
        return rank(hits, args.k)

    search = sync_method(search_steps)
    asearch = async_method(search_steps)

    def search_vector_steps(
        self,
        namespace: Namespace,
        vector: Sequence[float],
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> Steps[list[ScoredFact]]:
        """The `k` facts whose stored embedding is most cosine-similar to `vector`."""
        args = check_search(namespace, k, statuses, as_of)
        probe = unit_vector(vector, "vector")
        cache = yield from self._cache_steps(store_namespace(args.namespace))
        with self._lock:
            candidates = [
                (cache.facts[fact_id], stored)
                for fact_id, stored in cache.vectors.items()
                if visible(cache.facts[fact_id], args)
            ]
        hits = []
        for fact, stored in candidates:
            score = similarity(probe, stored)
            if score is not None:
                hits.append(ScoredFact(fact=fact, score=score))
        return rank(hits, args.k)

    search_vector = sync_method(search_vector_steps)
    asearch_vector = async_method(search_vector_steps)
