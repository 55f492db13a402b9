"""A small in-process BM25 index over `foldwise.memory._terms` terms.

The `BaseStore` adapter keeps one per namespace (a LangGraph store has no full-text search),
and tests use it as the reference ranking. Scores follow Okapi BM25 with the non-negative IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))``, ``k1 = 1.2``, ``b = 0.75`` (the values SQLite FTS5's
``bm25()`` uses), so a rarer term outweighs a common one and more matching terms outweigh
fewer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

__all__ = ["BM25Index"]

K1 = 1.2
B = 0.75


class BM25Index:
    """Documents (ids with their terms) and their postings; `scores` ranks them for a query."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lengths

    def add(self, doc_id: str, terms: Iterable[str]) -> None:
        """Index `doc_id` with `terms` (replacing what it had)."""
        self.remove(doc_id)
        counts = Counter(terms)
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[doc_id] = tf
        length = sum(counts.values())
        self._terms[doc_id] = tuple(counts)
        self._lengths[doc_id] = length
        self._total += length

    def remove(self, doc_id: str) -> None:
        """Drop `doc_id` (nothing happens if it is not indexed)."""
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        for term in self._terms.pop(doc_id):
            docs = self._postings[term]
            del docs[doc_id]
            if not docs:
                del self._postings[term]

    def scores(self, terms: Iterable[str]) -> dict[str, float]:
        """The BM25 score of every document matching at least one of `terms` (an OR query)."""
        count = len(self._lengths)
        if not count:
            return {}
        average = max(self._total / count, 1e-9)
        result: dict[str, float] = {}
        for term in dict.fromkeys(terms):
            docs = self._postings.get(term)
            if not docs:
                continue
            idf = math.log(1 + (count - len(docs) + 0.5) / (len(docs) + 0.5))
            for doc_id, tf in docs.items():
                norm = tf + K1 * (1 - B + B * self._lengths[doc_id] / average)
                result[doc_id] = result.get(doc_id, 0.0) + idf * tf * (K1 + 1) / norm
        return result
