"""Check 5 of `foldwise bench memory`: CJK search recall and latency, and the peers' FTS5."""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldwise.bench._memory_checks import fresh_manager, percentile, timed
from foldwise.bench._memory_search_corpus import memory_search_corpus
from foldwise.memory import Fact, MemoryManager, namespace_for
from foldwise.memory._facts import Namespace, utcnow

__all__ = ["SearchResult", "check_cjk_search"]


@dataclass
class SearchResult:
    facts: int = 0
    queries: int = 0
    recall_at_5: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    large_facts: int = 0
    large_p95_ms: float = 0.0
    peers: dict[str, float] = field(default_factory=dict)
    ranked_recall_at_5: float = 0.0
    """recall@5 when each query matches up to 20 facts: only a ranking puts the target first."""
    ranked_peers: dict[str, float] = field(default_factory=dict)


def _substring_peer(texts: Sequence[str], cases: Sequence[Any]) -> float:
    """recall@5 of an unranked substring match (the first 5 facts containing the query)."""
    hits = 0
    for case in cases:
        first = [i for i, text in enumerate(texts) if case.query in text][:5]
        hits += case.target in first
    return hits / max(1, len(cases))


def _plant(manager: MemoryManager, ns: Namespace, texts: Sequence[str]) -> list[str]:
    now = utcnow()
    facts = [
        Fact(
            id=f"fact_{i:024x}",
            namespace=ns,
            attribute=f"note:{i}",
            text=text,
            valid_from=now,
            recorded_at=now,
        )
        for i, text in enumerate(texts)
    ]
    for start in range(0, len(facts), 500):
        manager.backend.write(ns, new=facts[start : start + 500])
    return [f.id for f in facts]


def _fts5_peer(texts: Sequence[str], cases: Sequence[Any], tokenizer: str) -> float:
    """recall@5 of a plain SQLite FTS5 table with `tokenizer` (what peers use), same queries."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE f USING fts5(body, tokenize='{tokenizer}')")
    db.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", enumerate(texts))
    hits = 0
    for case in cases:
        quoted = '"' + case.query.replace('"', '""') + '"'
        try:
            rows = db.execute(
                "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 5", (quoted,)
            ).fetchall()
        except sqlite3.OperationalError:
            rows = []
        hits += any(r[0] == case.target for r in rows)
    return hits / max(1, len(cases))


def check_cjk_search(folder: Path, *, facts: int = 2000, large: int = 10_000) -> SearchResult:
    """300 queries of 1-4 characters over `facts` facts; p95 latency at `large` facts."""
    corpus = memory_search_corpus(facts, 300)
    result = SearchResult(facts=facts, queries=len(corpus.cases))
    ns = namespace_for("search", "agent")
    with fresh_manager(folder, "search") as manager:
        ids = _plant(manager, ns, corpus.texts)
        latencies: list[float] = []
        hits = 0
        for case in corpus.cases:
            found, ms = timed(manager.search, ns, case.query, k=5)
            latencies.append(ms)
            hits += any(f.id == ids[case.target] for f in found)
        result.recall_at_5 = hits / max(1, len(corpus.cases))
        result.p50_ms = statistics.median(latencies)
        result.p95_ms = percentile(latencies, 0.95)
    result.peers = {
        "FTS5 unicode61 (DeerFlow's default)": _fts5_peer(corpus.texts, corpus.cases, "unicode61"),
        "FTS5 trigram": _fts5_peer(corpus.texts, corpus.cases, "trigram"),
    }
    broad = memory_search_corpus(facts, 300, seed=20261203, max_matches=20)
    with fresh_manager(folder, "search_ranked") as manager:
        ranked_ids = _plant(manager, ns, broad.texts)
        found_ranked = 0
        for case in broad.cases:
            found = manager.search(ns, case.query, k=5)
            found_ranked += any(f.id == ranked_ids[case.target] for f in found)
    result.ranked_recall_at_5 = found_ranked / max(1, len(broad.cases))
    result.ranked_peers = {
        "substring match, unranked": _substring_peer(broad.texts, broad.cases),
        "FTS5 unicode61 (DeerFlow's default)": _fts5_peer(broad.texts, broad.cases, "unicode61"),
        "FTS5 trigram": _fts5_peer(broad.texts, broad.cases, "trigram"),
    }
    big = memory_search_corpus(large, 300, seed=20261202)
    with fresh_manager(folder, "search_large") as manager:
        _plant(manager, ns, big.texts)
        timings = [timed(manager.search, ns, c.query, k=5)[1] for c in big.cases]
    result.large_facts = large
    result.large_p95_ms = percentile(timings, 0.95)
    return result
