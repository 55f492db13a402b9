"""The memory backends under one conformance suite: each backend, through its sync and async API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from foldwise.memory import (
    Fact,
    FactSource,
    MemoryBackend,
    MemoryManager,
    MemoryOutbox,
    open_backend,
)
from foldwise.memory._facts import FactStatus, Namespace
from tests.memory.queue_support import KINDS, Clock, memory_url, outbox_for
from tests.support.async_only_store import AsyncOnlyStore
from tests.support.gateway import drop_schema, postgres_url

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS: Namespace = ("users", "alice", "agents", "agent")


def fact(
    text: str,
    *,
    id: str,
    namespace: Namespace = NS,
    attribute: str = "note",
    status: FactStatus = "active",
    confidence: float = 0.8,
    valid_from: datetime = T0,
    valid_to: datetime | None = None,
    recorded: int = 0,
    superseded_by: str | None = None,
) -> Fact:
    """A fact recorded `recorded` minutes after `T0`."""
    return Fact(
        id=id,
        namespace=namespace,
        attribute=attribute,
        text=text,
        status=status,
        confidence=confidence,
        valid_from=valid_from,
        valid_to=valid_to,
        recorded_at=T0 + timedelta(minutes=recorded),
        superseded_by=superseded_by,
        source=FactSource(thread_id="t1", message_ids=("m1",), run_id="r1", via="rules"),
    )


@pytest.fixture
def memory() -> MemoryManager:
    """A manager over a fresh in-memory store, set up."""
    manager = MemoryManager(open_backend("memory://"))
    manager.setup()
    return manager


class Api:
    """A backend called through its blocking methods or through its async twins."""

    def __init__(self, backend: MemoryBackend, mode: str) -> None:
        self.backend = backend
        self.mode = mode

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.backend, name)(*args, **kwargs)
        return await getattr(self.backend, "a" + name)(*args, **kwargs)

    async def write(self, namespace: Namespace = NS, **kwargs: Any) -> None:
        await self._call("write", namespace, **kwargs)

    async def get(self, fact_id: str, namespace: Namespace = NS) -> Fact | None:
        return await self._call("get", namespace, fact_id)  # type: ignore[no-any-return]

    async def list(self, namespace: Namespace = NS, **kwargs: Any) -> list[Fact]:
        return await self._call("list_facts", namespace, **kwargs)  # type: ignore[no-any-return]

    async def search(self, query: str, namespace: Namespace = NS, **kwargs: Any) -> list[str]:
        """The texts of the hits, best first."""
        hits = await self._call("search", namespace, query, **kwargs)
        return [hit.fact.text for hit in hits]

    async def search_vector(
        self, vector: Sequence[float], namespace: Namespace = NS, **kwargs: Any
    ) -> list[str]:
        hits = await self._call("search_vector", namespace, vector, **kwargs)
        return [hit.fact.id for hit in hits]

    async def delete(self, fact_id: str, namespace: Namespace = NS) -> bool:
        return await self._call("delete", namespace, fact_id)  # type: ignore[no-any-return]


BACKENDS = [
    "sqlite-sync",
    "sqlite-async",
    pytest.param("postgres-sync", marks=pytest.mark.postgres),
    pytest.param("postgres-async", marks=pytest.mark.postgres),
    "store-sync",
    "store-async",
    "async-only-store",
]


@pytest.fixture(params=BACKENDS)
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    """Each backend, set up fresh, with the API form its parameter names."""
    kind, _, mode = str(request.param).partition("-")
    cleanup = None
    store = None
    if kind == "sqlite":
        backend = open_backend(f"sqlite:///{tmp_path / 'db' / 'foldwise.db'}")
    elif kind == "postgres":
        url, dsn, schema = postgres_url()
        backend = open_backend(url)
        cleanup = (dsn, schema)
    elif kind == "store":
        backend = open_backend("memory://")
    else:
        asyncio.get_running_loop().set_debug(True)
        store = AsyncOnlyStore()
        backend = open_backend("unused", store=store)
        mode = "async"
    api = Api(backend, mode)
    if mode == "sync":
        backend.setup()
    else:
        await backend.asetup()
    try:
        yield api
    finally:
        if mode == "sync":
            backend.close()
        else:
            await backend.aclose()
        if cleanup is not None:
            drop_schema(*cleanup)
    if store is not None:
        assert store.sync_calls == []
        assert store.async_calls > 0


# --- the memory write queue (test_outbox.py, test_memory_worker.py) ---


@pytest.fixture(params=KINDS)
def queue_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each memory URL kind: a SQLite file, a fresh PostgreSQL schema, ``memory://``."""
    yield from memory_url(str(request.param), tmp_path)


@pytest.fixture
def clock() -> Clock:
    """A controllable clock for the outbox."""
    return Clock()


@pytest.fixture
def outbox(queue_url: str, clock: Clock) -> Iterator[MemoryOutbox]:
    """The outbox over `queue_url`, set up, on `clock`."""
    box = outbox_for(queue_url, clock)
    yield box
    box.close()
