"""The two seams of long-term memory: where facts are stored, and who proposes them.

A `MemoryBackend` stores facts and answers lexical (and, when it can, vector) searches; it
decides nothing. An `Extractor` reads a conversation slice and proposes `Candidate`s; it writes
nothing. `MemoryManager` sits between them and owns every decision (gate, quarantine,
supersession), so each backend and each extractor is small and checked by one conformance suite.

Both seams have a sync and an async form of every call, so a sync caller never needs an event
loop and an async caller never blocks one. Extractors are written once as step generators
(`foldwise._steps`): the model extractor yields its model call, the rules extractor yields none.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict

from foldwise._steps import Steps
from foldwise.memory._facts import Candidate, Fact, FactStatus, Namespace, Slot

__all__ = [
    "Extractor",
    "FactChange",
    "MemoryBackend",
    "MemoryCapabilities",
    "ScoredFact",
]


class MemoryCapabilities(BaseModel):
    """What a backend can do; a configured mode that needs more fails at start-up."""

    model_config = ConfigDict(frozen=True)

    search: bool = True
    """Ranked lexical search (BM25-like) over fact text, CJK included."""
    vector: bool = False
    """Stores embeddings and ranks by them (hybrid search with an embedder)."""
    transactions: bool = True
    """`write` is atomic: all of its facts and changes, or none."""


class FactChange(BaseModel):
    """A change to a stored fact's status, made in the same transaction as the new facts.

    The backend checks ``expected_revision`` (when given) and bumps ``revision`` by one.
    """

    model_config = ConfigDict(frozen=True)

    fact_id: str
    status: FactStatus
    valid_from: datetime | None = None
    """A new start of validity (approving a held fact starts it then), else unchanged."""
    valid_to: datetime | None = None
    superseded_by: str | None = None
    reason: str | None = None
    confidence: float | None = None
    """A new confidence (reinforcement), else unchanged."""
    expected_revision: int | None = None


class ScoredFact(BaseModel):
    """A search hit: the fact and its score (higher is better, comparable within one call)."""

    model_config = ConfigDict(frozen=True)

    fact: Fact
    score: float


@runtime_checkable
class MemoryBackend(Protocol):
    """Stores facts by namespace; every method has an ``a``-prefixed async twin.

    Contract (tests/memory/test_backend_conformance.py):

    - `write` is all-or-nothing. A change to a fact that is missing from the namespace raises
      `FactNotFoundError`; one whose ``expected_revision`` differs raises
      `RevisionConflictError`; in both cases nothing of the call is stored.
    - No method returns or touches a fact of another namespace (prefix namespaces included:
      ``("users", "a")`` does not see ``("users", "a", "agents", "x")``).
    - `search` ranks by its lexical score over `foldwise.memory._terms` terms (CJK bigrams and
      unigrams, Latin words), returns only ``statuses`` and, with ``as_of``, only facts current
      at that time; ties are broken by confidence, then recency.
    """

    capabilities: MemoryCapabilities

    def setup(self) -> None: ...
    async def asetup(self) -> None: ...
    def close(self) -> None: ...
    async def aclose(self) -> None: ...

    def write(
        self,
        namespace: Namespace,
        *,
        new: Sequence[Fact] = (),
        changes: Sequence[FactChange] = (),
        embeddings: Sequence[Sequence[float] | None] = (),
    ) -> None: ...
    async def awrite(
        self,
        namespace: Namespace,
        *,
        new: Sequence[Fact] = (),
        changes: Sequence[FactChange] = (),
        embeddings: Sequence[Sequence[float] | None] = (),
    ) -> None: ...

    def get(self, namespace: Namespace, fact_id: str) -> Fact | None: ...
    async def aget(self, namespace: Namespace, fact_id: str) -> Fact | None: ...

    def list_facts(
        self,
        namespace: Namespace,
        *,
        status: FactStatus | None = None,
        slot: Slot | None = None,
        limit: int | None = None,
    ) -> list[Fact]: ...
    async def alist_facts(
        self,
        namespace: Namespace,
        *,
        status: FactStatus | None = None,
        slot: Slot | None = None,
        limit: int | None = None,
    ) -> list[Fact]: ...

    def search(
        self,
        namespace: Namespace,
        query: str,
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]: ...
    async def asearch(
        self,
        namespace: Namespace,
        query: str,
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]: ...

    def search_vector(
        self,
        namespace: Namespace,
        vector: Sequence[float],
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]: ...
    async def asearch_vector(
        self,
        namespace: Namespace,
        vector: Sequence[float],
        *,
        k: int = 5,
        statuses: Sequence[FactStatus] = ("active",),
        as_of: datetime | None = None,
    ) -> list[ScoredFact]: ...

    def delete(self, namespace: Namespace, fact_id: str) -> bool: ...
    async def adelete(self, namespace: Namespace, fact_id: str) -> bool: ...


@runtime_checkable
class Extractor(Protocol):
    """Proposes facts from a conversation slice; never writes.

    `extract_steps` gets the selected messages (user inputs and final answers only, each with
    an id) and the namespace's active facts (so it can say SUPERSEDE / REINFORCE / RETRACT for
    a known slot). It raises `ExtractionError` on a failure or malformed output; the manager
    then falls back (model → rules) and applies nothing from the failed attempt.
    """

    name: str

    def extract_steps(
        self, messages: Sequence[BaseMessage], *, known: Sequence[Fact]
    ) -> Steps[list[Candidate]]: ...
