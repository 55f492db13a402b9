"""The `ArtifactStore` protocol: what the offload middleware and tools need from a backend."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from foldwise.offload._models import (
    ArtifactKind,
    ArtifactPage,
    ArtifactRef,
    ArtifactSearchResult,
    GcReport,
)
from foldwise.offload._search import DEFAULT_SEARCH_SECONDS

__all__ = ["DEFAULT_PAGE_CHARS", "ArtifactStore"]

DEFAULT_PAGE_CHARS = 16_000
"""Default character bound of one page (about 4,000 tokens of English)."""


@runtime_checkable
class ArtifactStore(Protocol):
    """Where offloaded texts live: generated ids, atomic writes, bounded reads, lifecycle.

    Every method takes the owning `thread_id`: an artifact is only visible from its thread.
    Artifact ids that foldwise did not generate raise `ArtifactIdError` before any storage is
    touched; missing artifacts raise `ArtifactNotFoundError`; backend failures `StorageError`.
    Each method has an async twin with an `a` prefix.
    """

    def put(
        self,
        thread_id: str,
        content: str,
        *,
        source: str,
        kind: ArtifactKind,
        meta: Mapping[str, str] | None = None,
    ) -> ArtifactRef:
        """Store `content` (identical content in a thread is stored once) and return its ref."""
        ...

    def get(self, thread_id: str, artifact_id: str) -> str:
        """The whole stored text."""
        ...

    def get_ref(self, thread_id: str, artifact_id: str) -> ArtifactRef:
        """The reference of a stored artifact."""
        ...

    def read_page(
        self,
        thread_id: str,
        artifact_id: str,
        *,
        offset: int = 0,
        limit: int = 200,
        max_chars: int = DEFAULT_PAGE_CHARS,
    ) -> ArtifactPage:
        """Up to `limit` rows from row `offset`, bounded by `max_chars` (at least one row)."""
        ...

    def search(
        self,
        thread_id: str,
        artifact_id: str,
        pattern: str,
        *,
        regex: bool = False,
        max_matches: int = 20,
        timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> ArtifactSearchResult:
        """Rows containing `pattern`, with a time budget."""
        ...

    def list(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """The thread's artifacts, oldest first."""
        ...

    def delete(self, thread_id: str, artifact_id: str) -> bool:
        """Remove one artifact; False when it did not exist."""
        ...

    def delete_thread(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Remove every artifact of a thread; returns what was removed."""
        ...

    def gc(
        self,
        *,
        now: datetime | None = None,
        max_age: timedelta | None = None,
        max_bytes_per_thread: int | None = None,
    ) -> GcReport:
        """Remove artifacts older than `max_age` and the oldest beyond a per-thread quota."""
        ...

    async def aput(
        self,
        thread_id: str,
        content: str,
        *,
        source: str,
        kind: ArtifactKind,
        meta: Mapping[str, str] | None = None,
    ) -> ArtifactRef:
        """Async twin of `put`."""
        ...

    async def aget(self, thread_id: str, artifact_id: str) -> str:
        """Async twin of `get`."""
        ...

    async def aget_ref(self, thread_id: str, artifact_id: str) -> ArtifactRef:
        """Async twin of `get_ref`."""
        ...

    async def aread_page(
        self,
        thread_id: str,
        artifact_id: str,
        *,
        offset: int = 0,
        limit: int = 200,
        max_chars: int = DEFAULT_PAGE_CHARS,
    ) -> ArtifactPage:
        """Async twin of `read_page`."""
        ...

    async def asearch(
        self,
        thread_id: str,
        artifact_id: str,
        pattern: str,
        *,
        regex: bool = False,
        max_matches: int = 20,
        timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> ArtifactSearchResult:
        """Async twin of `search`."""
        ...

    async def alist(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Async twin of `list`."""
        ...

    async def adelete(self, thread_id: str, artifact_id: str) -> bool:
        """Async twin of `delete`."""
        ...

    async def adelete_thread(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Async twin of `delete_thread`."""
        ...

    async def agc(
        self,
        *,
        now: datetime | None = None,
        max_age: timedelta | None = None,
        max_bytes_per_thread: int | None = None,
    ) -> GcReport:
        """Async twin of `gc`."""
        ...
