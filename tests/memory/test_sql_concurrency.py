"""Revision checks hold under real concurrency: two connections racing to close one fact."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldwise.errors import RevisionConflictError
from foldwise.memory import FactChange, MemoryBackend, open_backend
from tests.memory.conftest import NS, fact
from tests.support.gateway import drop_schema, postgres_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'race.db'}"
        return
    url, dsn, schema = postgres_url()
    try:
        yield url
    finally:
        drop_schema(dsn, schema)


def test_only_one_of_two_racing_writers_wins(url: str) -> None:
    backends: list[MemoryBackend] = [open_backend(url) for _ in range(2)]
    for backend in backends:
        backend.setup()
    try:
        backends[0].write(NS, new=[fact("I live in Munich", id="old")])
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def close_with(backend: MemoryBackend, name: str) -> None:
            barrier.wait()
            try:
                backend.write(
                    NS,
                    new=[fact(f"I live in {name}", id=name, recorded=1)],
                    changes=[
                        FactChange(
                            fact_id="old",
                            status="superseded",
                            superseded_by=name,
                            expected_revision=1,
                        )
                    ],
                )
                outcomes.append("won")
            except RevisionConflictError:
                outcomes.append("conflict")

        threads = [
            threading.Thread(target=close_with, args=(backend, name))
            for backend, name in zip(backends, ("Hamburg", "Paris"), strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(outcomes) == ["conflict", "won"]
        old = backends[1].get(NS, "old")
        assert old is not None and old.revision == 2
        assert [f.id for f in backends[1].list_facts(NS, status="active")] == [old.superseded_by]
    finally:
        for backend in backends:
            backend.close()
