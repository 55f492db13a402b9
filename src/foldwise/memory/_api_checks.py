"""What `MemoryManager`'s public methods check before anything is read or written.

Each check names the bad argument in a `MemoryInputError`; the slot helpers say which facts
ever held a slot's value and which slot a text of its own gets.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import ValidationError

from foldwise.errors import MemoryInputError
from foldwise.memory._facts import Candidate, Fact

__all__ = [
    "MAX_K",
    "REJECTED",
    "api_candidate",
    "check_fact_id",
    "check_k",
    "note_slot",
    "was_current",
]

_FACT_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_K = 100
"""The most facts one search returns."""
REJECTED = "quarantine_rejected"
"""The reason of a held fact a reviewer refused (it was never current)."""


def was_current(fact: Fact) -> bool:
    """Whether the fact was ever its slot's value (held and rejected facts never were)."""
    return fact.status != "quarantined" and fact.reason != REJECTED


def check_fact_id(fact_id: object) -> str:
    """`fact_id`, or `MemoryInputError` naming ``fact_id``."""
    if not isinstance(fact_id, str) or not _FACT_ID.match(fact_id):
        raise MemoryInputError("is not a memory fact id", field="fact_id")
    return fact_id


def check_k(k: object) -> int:
    """`k`, or `MemoryInputError` naming ``k`` (an integer from 1 to `MAX_K`)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise MemoryInputError(f"must be an integer from 1 to {MAX_K}", field="k")
    return k


def api_candidate(**fields: Any) -> Candidate:
    """A `Candidate` from API arguments; a bad one raises `MemoryInputError` naming the field."""
    try:
        return Candidate(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "candidate"
        raise MemoryInputError(str(error["msg"]), field=field) from exc


def note_slot(text: str) -> str:
    """The slot of a text no pattern reads: ``note:`` and a digest of its words."""
    digest = hashlib.sha256(" ".join(text.casefold().split()).encode()).hexdigest()[:12]
    return f"note:{digest}"
