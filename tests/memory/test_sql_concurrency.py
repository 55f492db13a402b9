"""Revision checks hold under real concurrency: two connections racing to close one fact."""

from __future__ import annotations

import threading

from foldwise.errors import RevisionConflictError
from foldwise.memory import FactChange, MemoryBackend, open_backend
from tests.memory.conftest import NS, fact


def test_only_one_of_two_racing_writers_wins(storage_url: str) -> None:
    """On the gateway's storage URL (a SQLite file, or a fresh PostgreSQL schema)."""
    backends: list[MemoryBackend] = [open_backend(storage_url) for _ in range(2)]
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
