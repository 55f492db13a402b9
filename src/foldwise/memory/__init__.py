"""Long-term memory across threads (seed 003's third layer): facts that outlive a thread.

See docs/memory.md. The pieces: `Fact` and its slots (`_facts`), the two seams
(`MemoryBackend`, `Extractor` in `_contracts`), and `MemoryManager`, which owns every decision.
"""

from __future__ import annotations

from foldwise.memory._backends import open_backend, open_outbox
from foldwise.memory._contracts import (
    Extractor,
    FactChange,
    MemoryBackend,
    MemoryCapabilities,
    ScoredFact,
)
from foldwise.memory._events import MemoryEvent, MemoryEventSink
from foldwise.memory._facts import (
    Candidate,
    Fact,
    FactSource,
    MemoryDecision,
    Namespace,
    namespace_for,
)
from foldwise.memory._manager import MemoryManager
from foldwise.memory._outbox import (
    DeadLetter,
    Enqueued,
    MemoryOutbox,
    OutboxBatch,
    OutboxItem,
    OutboxStatus,
    outbox_key,
)
from foldwise.memory._outbox_local import LocalMemoryOutbox
from foldwise.memory._outbox_sql import SqlMemoryOutbox

# --- storage backends (memstore branch) ---
from foldwise.memory._sql_backend import SqlMemoryBackend
from foldwise.memory._store_backend import StoreMemoryBackend

# --- end storage backends ---
from foldwise.memory._worker import CommitCheck, MemoryWorker

__all__ = [
    "Candidate",
    "CommitCheck",
    "DeadLetter",
    "Enqueued",
    "Extractor",
    "Fact",
    "FactChange",
    "FactSource",
    "LocalMemoryOutbox",
    "MemoryBackend",
    "MemoryCapabilities",
    "MemoryDecision",
    "MemoryEvent",
    "MemoryEventSink",
    "MemoryManager",
    "MemoryOutbox",
    "MemoryWorker",
    "Namespace",
    "OutboxBatch",
    "OutboxItem",
    "OutboxStatus",
    "ScoredFact",
    "SqlMemoryBackend",
    "SqlMemoryOutbox",
    "StoreMemoryBackend",
    "namespace_for",
    "open_backend",
    "open_outbox",
    "outbox_key",
]
