"""Long-term memory across threads (seed 003's third layer): facts that outlive a thread.

See docs/memory.md. The pieces: `Fact` and its slots (`_facts`), the two seams
(`MemoryBackend`, `Extractor` in `_contracts`), and `MemoryManager`, which owns every decision.
"""

from __future__ import annotations

from foldwise.memory._backends import open_backend  # backends (memstore)
from foldwise.memory._contracts import (
    Extractor,
    FactChange,
    MemoryBackend,
    MemoryCapabilities,
    ScoredFact,
)
from foldwise.memory._facts import (
    Candidate,
    Fact,
    FactSource,
    MemoryDecision,
    Namespace,
    namespace_for,
)
from foldwise.memory._manager import MemoryManager

# --- storage backends (memstore branch) ---
from foldwise.memory._sql_backend import SqlMemoryBackend
from foldwise.memory._store_backend import StoreMemoryBackend

# --- end storage backends ---

__all__ = [
    "Candidate",
    "Extractor",
    "Fact",
    "FactChange",
    "FactSource",
    "MemoryBackend",
    "MemoryCapabilities",
    "MemoryDecision",
    "MemoryManager",
    "Namespace",
    "ScoredFact",
    "SqlMemoryBackend",
    "StoreMemoryBackend",
    "namespace_for",
    "open_backend",
]
