"""Hybrid ranking: reciprocal-rank fusion of lexical and vector hits."""

from __future__ import annotations

from collections.abc import Sequence

from foldwise.memory._contracts import ScoredFact
from foldwise.memory._facts import Fact

__all__ = ["RRF_K", "fuse_ranked"]

RRF_K = 60
"""The usual reciprocal-rank-fusion constant (Cormack et al., 2009)."""


def fuse_ranked(rankings: Sequence[Sequence[ScoredFact]]) -> list[Fact]:
    """Facts ordered by the sum of ``1 / (RRF_K + rank)`` over the rankings they appear in.

    Ties keep the order of first appearance (lexical first), so fusion is deterministic.
    """
    scores: dict[str, float] = {}
    facts: dict[str, Fact] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            facts.setdefault(hit.fact.id, hit.fact)
            scores[hit.fact.id] = scores.get(hit.fact.id, 0.0) + 1.0 / (RRF_K + rank)
    order = {fid: i for i, fid in enumerate(facts)}
    ranked = sorted(facts, key=lambda fid: (-scores[fid], order[fid]))
    return [facts[fid] for fid in ranked]
