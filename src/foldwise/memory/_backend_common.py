"""What every `MemoryBackend` checks and computes the same way, written once.

Argument checks (each names the bad argument and runs before anything is stored), the change
a `FactChange` makes to a fact, the as-of and status filters, the ranking tie-breaks, and
vector search: vectors are stored unit-length (cosine similarity is then a dot product) and,
in SQL, packed as little-endian float32.
"""

from __future__ import annotations

import json
import math
import operator
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import get_args

from foldwise.errors import FactNotFoundError, MemoryInputError, RevisionConflictError
from foldwise.memory._contracts import FactChange, ScoredFact
from foldwise.memory._facts import Fact, FactStatus, Namespace, check_namespace

__all__ = [
    "SearchArgs",
    "WriteArgs",
    "apply_change",
    "check_change",
    "check_search",
    "check_write",
    "namespace_key",
    "pack_vector",
    "rank",
    "similarity",
    "unit_vector",
    "unpack_vector",
    "visible",
]

_STATUSES: frozenset[str] = frozenset(get_args(FactStatus))


def namespace_key(namespace: Namespace) -> str:
    """The namespace as one unambiguous string (compact JSON): equal keys, equal tuples."""
    return json.dumps(list(namespace), separators=(",", ":"))


def _aware(value: datetime | None, field: str) -> None:
    if value is not None and not isinstance(value, datetime):
        raise MemoryInputError("must be a datetime (timezone-aware, UTC)", field=field)
    if value is not None and value.tzinfo is None:
        raise MemoryInputError("must be timezone-aware (UTC)", field=field)


@dataclass(frozen=True, slots=True)
class WriteArgs:
    """A checked `write` call: the namespace, the facts, their changes and vectors."""

    namespace: Namespace
    new: tuple[Fact, ...]
    changes: tuple[FactChange, ...]
    embeddings: tuple[tuple[float, ...] | None, ...]

    def embedding(self, index: int) -> tuple[float, ...] | None:
        """The vector given for ``new[index]``, if any."""
        return self.embeddings[index] if self.embeddings else None

    def new_ids(self) -> set[str]:
        """The ids of the facts this write adds."""
        return {fact.id for fact in self.new}


def unit_vector(vector: Sequence[float], field: str) -> tuple[float, ...]:
    """`vector` scaled to length 1, or `MemoryInputError` naming `field` (empty, not finite, 0)."""
    try:
        values = tuple(float(x) for x in vector)
    except (TypeError, ValueError) as exc:
        raise MemoryInputError("must be a sequence of numbers", field=field) from exc
    if not values or not all(math.isfinite(x) for x in values):
        raise MemoryInputError("must be a non-empty sequence of finite numbers", field=field)
    norm = math.sqrt(math.fsum(x * x for x in values))
    if norm == 0 or not math.isfinite(norm):
        raise MemoryInputError("must have a non-zero, finite length", field=field)
    return tuple(x / norm for x in values)


def pack_vector(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes (what the SQL backends store)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(data: bytes) -> tuple[float, ...]:
    """The vector `pack_vector` stored."""
    return struct.unpack(f"<{len(data) // 4}f", data)


def similarity(probe: Sequence[float], stored: Sequence[float]) -> float | None:
    """Cosine similarity of two unit vectors, or `None` when their dimensions differ."""
    if len(probe) != len(stored):
        return None
    return float(sum(map(operator.mul, probe, stored)))


def check_write(
    namespace: Namespace,
    new: Sequence[Fact],
    changes: Sequence[FactChange],
    embeddings: Sequence[Sequence[float] | None],
) -> WriteArgs:
    """Check a `write` call before anything is stored; `MemoryInputError` names what is wrong."""
    namespace = check_namespace(namespace)
    seen: set[str] = set()
    for index, fact in enumerate(new):
        if not isinstance(fact, Fact):
            raise MemoryInputError("must be a Fact", field=f"new[{index}]")
        if fact.namespace != namespace:
            raise MemoryInputError(
                "differs from the namespace written to", field=f"new[{index}].namespace"
            )
        if fact.id in seen:
            raise MemoryInputError(f"repeats fact id {fact.id!r}", field=f"new[{index}].id")
        seen.add(fact.id)
        for name in ("valid_from", "valid_to", "recorded_at"):
            _aware(getattr(fact, name), f"new[{index}].{name}")
    for index, change in enumerate(changes):
        if not isinstance(change, FactChange):
            raise MemoryInputError("must be a FactChange", field=f"changes[{index}]")
        _aware(change.valid_to, f"changes[{index}].valid_to")
        _aware(change.valid_from, f"changes[{index}].valid_from")
    if embeddings and len(embeddings) != len(new):
        raise MemoryInputError(
            f"has {len(embeddings)} entries for {len(new)} new facts", field="embeddings"
        )
    vectors = tuple(
        None if vector is None else unit_vector(vector, f"embeddings[{index}]")
        for index, vector in enumerate(embeddings)
    )
    return WriteArgs(namespace, tuple(new), tuple(changes), vectors)


def check_change(change: FactChange, current: Fact | None, known_ids: Iterable[str]) -> Fact:
    """`current` with `change` applied, or the error that refuses the whole write.

    Args:
        change: The change.
        current: The stored fact it names (as this write has changed it so far), or `None`.
        known_ids: Ids in the namespace a ``superseded_by`` may point at (stored or new).

    Raises:
        FactNotFoundError: The fact, or its ``superseded_by`` target, is not in the namespace.
        RevisionConflictError: ``expected_revision`` is not the stored revision.
    """
    if current is None:
        raise FactNotFoundError(change.fact_id)
    expected = change.expected_revision
    if expected is not None and expected != current.revision:
        raise RevisionConflictError(change.fact_id, expected=expected, actual=current.revision)
    if change.superseded_by is not None and change.superseded_by not in set(known_ids):
        raise FactNotFoundError(change.superseded_by)
    return apply_change(current, change)


def apply_change(fact: Fact, change: FactChange) -> Fact:
    """`fact` after `change`: status, validity end, successor and reason as the change says.

    ``valid_to``, ``superseded_by`` and ``reason`` are set to the change's values (``None``
    clears them, as approving a quarantined fact does); ``confidence`` and ``valid_from`` only
    when given. The
    revision goes up by one.
    """
    update: dict[str, object] = {
        "status": change.status,
        "valid_to": change.valid_to,
        "superseded_by": change.superseded_by,
        "reason": change.reason,
        "revision": fact.revision + 1,
    }
    if change.confidence is not None:
        update["confidence"] = change.confidence
    if change.valid_from is not None:
        update["valid_from"] = change.valid_from
    return fact.model_copy(update=update)


@dataclass(frozen=True, slots=True)
class SearchArgs:
    """A checked search call."""

    namespace: Namespace
    k: int
    statuses: tuple[FactStatus, ...]
    as_of: datetime | None


def check_search(
    namespace: Namespace, k: int, statuses: Sequence[FactStatus], as_of: datetime | None
) -> SearchArgs:
    """Check the arguments every search takes; `MemoryInputError` names the bad one."""
    namespace = check_namespace(namespace)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise MemoryInputError("must be a positive integer", field="k")
    if isinstance(statuses, str):
        raise MemoryInputError("must be a sequence of statuses", field="statuses")
    for index, status in enumerate(statuses):
        if status not in _STATUSES:
            raise MemoryInputError(
                f"must be one of {sorted(_STATUSES)}", field=f"statuses[{index}]"
            )
    _aware(as_of, "as_of")
    chosen = tuple(dict.fromkeys(statuses))
    if as_of is not None:  # a quarantined fact is never current (`Fact.current_at`)
        chosen = tuple(s for s in chosen if s != "quarantined")
    return SearchArgs(namespace, k, chosen, as_of)


def visible(fact: Fact, args: SearchArgs) -> bool:
    """Whether a search with `args` may return `fact` (its status, and as-of validity)."""
    if fact.status not in args.statuses:
        return False
    return args.as_of is None or fact.current_at(args.as_of)


def rank(hits: Iterable[ScoredFact], k: int) -> list[ScoredFact]:
    """The best `k`: by score, then confidence, then the most recently recorded, then id."""
    ordered = sorted(
        hits,
        key=lambda hit: (
            -hit.score,
            -hit.fact.confidence,
            -hit.fact.recorded_at.timestamp(),
            hit.fact.id,
        ),
    )
    return ordered[:k]
