"""CJK search quality on a seeded synthetic corpus (issue 12, check 5), per backend.

Recall@5 over 300 queries of 1-4 characters on 2,000 facts must be at least 0.95; the 10,000-fact
latency check (p95 ≤ 20 ms on SQLite) is `slow`. Both print what they measured (`pytest -s`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from foldwise.bench._memory_search_corpus import SearchCorpus, memory_search_corpus
from foldwise.memory import Fact, MemoryBackend, open_backend
from tests.memory.conftest import NS, T0
from tests.support.gateway import drop_schema, postgres_url

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "store"]


def _open(kind: str, tmp_path: Path) -> tuple[MemoryBackend, tuple[str, str] | None]:
    if kind == "sqlite":
        return open_backend(f"sqlite:///{tmp_path / 'recall.db'}"), None
    if kind == "store":
        return open_backend("memory://"), None
    url, dsn, schema = postgres_url()
    return open_backend(url), (dsn, schema)


def _load(backend: MemoryBackend, corpus: SearchCorpus) -> None:
    facts = [
        Fact(id=f"f{i}", namespace=NS, attribute=f"a{i}", text=text, valid_from=T0, recorded_at=T0)
        for i, text in enumerate(corpus.texts)
    ]
    for start in range(0, len(facts), 500):
        backend.write(NS, new=facts[start : start + 500])


def _measure(backend: MemoryBackend, corpus: SearchCorpus) -> tuple[float, float]:
    """(recall@5, p95 latency in ms) over the corpus's queries."""
    found, latencies = 0, []
    for case in corpus.cases:
        started = time.perf_counter()
        hits = backend.search(NS, case.query, k=5)
        latencies.append(time.perf_counter() - started)
        found += any(hit.fact.id == f"f{case.target}" for hit in hits)
    latencies.sort()
    return found / len(corpus.cases), 1000 * latencies[int(0.95 * len(latencies))]


def test_the_corpus_is_deterministic_and_has_short_cjk_queries() -> None:
    corpus = memory_search_corpus(2000, 300)
    assert corpus == memory_search_corpus(2000, 300)
    assert len(corpus.texts) == 2000 and len(corpus.cases) == 300
    lengths = {len(case.query) for case in corpus.cases}
    assert lengths == {1, 2, 3, 4}
    for case in corpus.cases:
        assert case.query in corpus.texts[case.target].lower()


def _run(kind: str, tmp_path: Path, corpus: SearchCorpus) -> tuple[float, float]:
    backend, cleanup = _open(kind, tmp_path)
    backend.setup()
    try:
        _load(backend, corpus)
        return _measure(backend, corpus)
    finally:
        backend.close()
        if cleanup:
            drop_schema(*cleanup)


@pytest.mark.parametrize("kind", KINDS)
def test_cjk_recall_at_5_on_2000_facts(kind: str, tmp_path: Path) -> None:
    recall, p95 = _run(kind, tmp_path, memory_search_corpus(2000, 300))
    print(f"\n{kind}: recall@5 {recall:.3f}, p95 {p95:.2f} ms over 2,000 facts")
    assert recall >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_search_latency_at_10000_facts(kind: str, tmp_path: Path) -> None:
    # Unselective queries too (max_matches unbounded): 1-character queries hit many facts.
    corpus = memory_search_corpus(10_000, 300, max_matches=10_000)
    recall, p95 = _run(kind, tmp_path, corpus)
    print(f"\n{kind}: p95 {p95:.2f} ms, recall@5 {recall:.3f} over 10,000 facts")
    if kind == "sqlite":
        assert p95 <= 20.0
