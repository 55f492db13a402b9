"""foldwise's long-term memory routes: the caller's own facts, never anyone else's.

``/memory/facts`` (list, add, get, update, forget, history), ``/memory/search`` and
``/memory/quarantine`` (list, approve, reject) call the gateway's `MemoryManager`, which the
lifespan opens when ``memory.enabled`` (else every route answers 404 saying so).

The namespace is always ``("users", memory_user_id(identity), "agents", agent)``: the user part
comes only from the authenticated identity (`foldwise.gateway._tenancy.memory_user_id`), the
agent part from ``?agent=`` / ``agent`` (default ``memory.agent``). No request names a user, so
another identity's fact ids are simply not found (404, never 403). Bad input is a 422 naming
the field, a stale ``expected_revision`` a 409; nothing is written in either case.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from foldwise.errors import MemoryInputError, RevisionConflictError
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep
from foldwise.gateway._errors import MemoryDisabledError, RequestFieldError
from foldwise.gateway._schemas import MAX_OFFSET, MAX_PAGE
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway._tenancy import memory_user_id
from foldwise.memory import Fact, MemoryManager, Namespace, namespace_for
from foldwise.memory._facts import FactStatus

__all__ = ["FactCreate", "FactPatch", "MemoryScope", "MemorySearch", "router"]

router = APIRouter(tags=["memory"])

AgentQuery = Annotated[str | None, Query(max_length=128, description="default: memory.agent")]
FactIdPath = Annotated[str, Path(max_length=128)]


class _MemoryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FactCreate(_MemoryBody):
    """`POST /memory/facts`: remember `text` (its slot read from the text unless given)."""

    text: str
    attribute: str | None = Field(default=None, min_length=1, max_length=64)
    agent: str | None = Field(default=None, max_length=128)


class FactPatch(_MemoryBody):
    """`PATCH /memory/facts/{id}`: a new text for an active fact, at the revision read."""

    text: str
    expected_revision: StrictInt = Field(ge=1, le=MAX_OFFSET)
    agent: str | None = Field(default=None, max_length=128)


class MemorySearch(_MemoryBody):
    """`POST /memory/search`."""

    query: str
    k: StrictInt = Field(default=5, ge=1, le=100)
    as_of: datetime | None = None
    agent: str | None = Field(default=None, max_length=128)


def _manager(gateway: Gateway) -> MemoryManager:
    if gateway.memory is None:
        raise MemoryDisabledError()
    return gateway.memory


def _namespace(gateway: Gateway, identity: str, agent: str | None) -> Namespace:
    """The caller's namespace for `agent`; a malformed agent is a 422 naming ``agent``."""
    try:
        return namespace_for(memory_user_id(identity), agent or gateway.config.memory.agent)
    except MemoryInputError as error:
        raise RequestFieldError("agent", "must be 1-128 of A-Z a-z 0-9 _ . @ : + -") from error


@dataclass(frozen=True)
class MemoryScope:
    """The gateway's memory and the caller's namespace in it."""

    memory: MemoryManager
    namespace: Namespace


def _scope(gateway: Gateway, identity: str, agent: str | None) -> MemoryScope:
    return MemoryScope(_manager(gateway), _namespace(gateway, identity, agent))


async def _query_scope(
    gateway: GatewayDep, identity: IdentityDep, agent: AgentQuery = None
) -> MemoryScope:
    return _scope(gateway, identity, agent)


ScopeDep = Annotated[MemoryScope, Depends(_query_scope)]
"""The caller's memory scope, its agent from ``?agent=``."""


def _fact(fact: Fact) -> dict[str, Any]:
    return fact.model_dump(mode="json")


def _facts(facts: list[Fact], namespace: Namespace) -> JSONResponse:
    return JSONResponse({"namespace": list(namespace), "facts": [_fact(f) for f in facts]})


@router.get("/memory/facts")
async def list_facts(
    scope: ScopeDep,
    status: Annotated[FactStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> Response:
    """The caller's facts, oldest first, optionally of one status."""
    facts = await scope.memory.alist(scope.namespace, status=status, limit=limit)
    return _facts(facts, scope.namespace)


@router.post("/memory/facts", status_code=201)
async def add_fact(body: FactCreate, gateway: GatewayDep, identity: IdentityDep) -> Response:
    """Remember a fact; a new value for its slot supersedes the old one (201 with the fact).

    Text that tries to instruct the agent is stored ``quarantined`` (never injected).
    """
    scope = _scope(gateway, identity, body.agent)
    fact = await scope.memory.aadd(scope.namespace, body.text, attribute=body.attribute)
    return JSONResponse(_fact(fact), status_code=201)


@router.get("/memory/facts/{fact_id}")
async def get_fact(fact_id: FactIdPath, scope: ScopeDep) -> Response:
    """One of the caller's facts (404 when it is not the caller's)."""
    return JSONResponse(_fact(await scope.memory.aget(scope.namespace, fact_id)))


@router.patch("/memory/facts/{fact_id}")
async def update_fact(
    fact_id: FactIdPath, body: FactPatch, gateway: GatewayDep, identity: IdentityDep
) -> Response:
    """Replace an active fact's text: the answer is the new fact, which supersedes it.

    409 when the fact changed since `expected_revision` was read; nothing is written.
    """
    scope = _scope(gateway, identity, body.agent)
    memory, ns = scope.memory, scope.namespace
    current = await memory.aget(ns, fact_id)
    if current.revision != body.expected_revision:
        # Checked before the status: a fact another client superseded since this one read it
        # is a conflict (409), not a bad request. The write re-checks it atomically.
        raise RevisionConflictError(
            current.id, expected=body.expected_revision, actual=current.revision
        )
    fact = await memory.aupdate(ns, fact_id, body.text, expected_revision=body.expected_revision)
    return JSONResponse(_fact(fact))


@router.delete("/memory/facts/{fact_id}")
async def forget_fact(fact_id: FactIdPath, scope: ScopeDep) -> Response:
    """Forget a fact for real: it and every version of its slot are deleted."""
    deleted = await scope.memory.aforget(scope.namespace, fact_id)
    return JSONResponse({"fact_id": fact_id, "deleted": deleted})


@router.get("/memory/facts/{fact_id}/history")
async def fact_history(fact_id: FactIdPath, scope: ScopeDep) -> Response:
    """Every version of the fact's slot, oldest first."""
    return _facts(await scope.memory.ahistory(scope.namespace, fact_id), scope.namespace)


@router.post("/memory/search")
async def search_facts(body: MemorySearch, gateway: GatewayDep, identity: IdentityDep) -> Response:
    """The `k` best facts for `query`: active ones, or those current at `as_of`."""
    scope = _scope(gateway, identity, body.agent)
    if body.as_of is not None and body.as_of.utcoffset() is None:
        raise RequestFieldError("as_of", "must carry a timezone (e.g. 2026-01-01T00:00:00Z)")
    found = await scope.memory.asearch(scope.namespace, body.query, k=body.k, as_of=body.as_of)
    return _facts(found, scope.namespace)


@router.get("/memory/quarantine")
async def list_quarantine(scope: ScopeDep) -> Response:
    """Facts held for review: stored because they try to act on the agent, never injected."""
    return _facts(await scope.memory.aquarantined(scope.namespace), scope.namespace)


@router.post("/memory/quarantine/{fact_id}/approve")
async def approve_fact(fact_id: FactIdPath, scope: ScopeDep) -> Response:
    """Release a quarantined fact: it becomes active and supersedes its slot's value."""
    return JSONResponse(_fact(await scope.memory.aapprove(scope.namespace, fact_id)))


@router.post("/memory/quarantine/{fact_id}/reject")
async def reject_fact(fact_id: FactIdPath, scope: ScopeDep) -> Response:
    """Refuse a quarantined fact: it stays, retracted, for the record."""
    return JSONResponse(_fact(await scope.memory.areject(scope.namespace, fact_id)))


@router.get("/memory/queue")
async def queue_status(gateway: GatewayDep, identity: IdentityDep) -> Response:
    """The caller's part of the memory write queue.

    Rows by status, the oldest pending age, the newest dead letters with their errors; other
    users' rows are neither counted nor shown.
    """
    _manager(gateway)
    if gateway.memory_queue is None:  # pragma: no cover - opened together with the manager
        raise MemoryDisabledError()
    user = memory_user_id(identity)
    status = await gateway.memory_queue.astatus(namespace_prefix=("users", user))
    dead = [
        {
            "key": letter.key,
            "namespace": list(letter.namespace),
            "thread_id": letter.thread_id,
            "attempts": letter.attempts,
            "error": letter.error,
            "at": letter.at.isoformat() if letter.at else None,
        }
        for letter in status.dead
    ]
    return JSONResponse(
        {
            "counts": status.counts,
            "oldest_pending_seconds": status.oldest_pending_seconds,
            "dead": dead,
        }
    )


@router.get("/memory/events")
async def list_events(
    scope: ScopeDep, limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50
) -> Response:
    """The caller's memory decisions, newest first, with their reasons and evidence.

    Added, superseded, retracted, quarantined, rejected by the gate or deduplicated.
    """
    events = await scope.memory.aevents(scope.namespace, limit=limit)
    return JSONResponse(
        {"namespace": list(scope.namespace), "events": [e.model_dump(mode="json") for e in events]}
    )
