"""`BaseArtifactStore`: the logic both artifact store backends share.

A backend only provides a handful of primitives (write a text and its metadata, read the
metadata, stream the text in pieces, delete, list); everything else (id generation and
validation, dedupe, quota, paging, search, garbage collection, async twins) lives here once, so
both backends behave the same and pass one conformance suite.

Every public method validates the artifact id and maps the thread id to a safe key before a
primitive is called: a string that foldwise did not generate never reaches a backend.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import hashlib
import logging
from collections.abc import Callable, Generator, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from foldwise.errors import ArtifactNotFoundError, StorageError
from foldwise.offload._ids import make_artifact_id, thread_key, validate_artifact_id
from foldwise.offload._models import (
    ArtifactKind,
    ArtifactPage,
    ArtifactRef,
    ArtifactRow,
    ArtifactSearchResult,
    GcReport,
)
from foldwise.offload._preview import one_line_preview, printable
from foldwise.offload._protocol import DEFAULT_PAGE_CHARS
from foldwise.offload._rows import count_rows, iter_rows
from foldwise.offload._search import DEFAULT_SEARCH_SECONDS, search_rows
from foldwise.tokens import estimate_tokens

__all__ = ["BaseArtifactStore"]

logger = logging.getLogger(__name__)

_MAX_META_VALUE = 200


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BaseArtifactStore(abc.ABC):
    """Shared implementation of `ArtifactStore` over a few backend primitives.

    Args:
        max_bytes_per_thread: Quota enforced after every `put` (oldest artifacts evicted
            first); `None` for no quota. An artifact larger than the quota is refused.
        clock: Returns the current time (aware, UTC); injectable for tests.
    """

    def __init__(
        self,
        *,
        max_bytes_per_thread: int | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if max_bytes_per_thread is not None and max_bytes_per_thread <= 0:
            raise ValueError("max_bytes_per_thread must be positive or None")
        self.max_bytes_per_thread = max_bytes_per_thread
        self._clock = clock or _utc_now

    # -- primitives ------------------------------------------------------------------------

    @abc.abstractmethod
    def _write(self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]) -> None:
        """Write the text (unless `content` is None: already stored) and then its metadata."""

    @abc.abstractmethod
    def _read_meta(self, key: str, artifact_id: str) -> dict[str, Any] | None:
        """The metadata dict, or None when the artifact is not (fully) stored."""

    @abc.abstractmethod
    def _list_meta(self, key: str) -> builtins.list[dict[str, Any]]:
        """Metadata of every complete artifact of a thread key."""

    @abc.abstractmethod
    def _pieces(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Iterator[str]:
        """The stored text, in pieces of bounded size."""

    @abc.abstractmethod
    def _remove(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> None:
        """Delete an artifact (metadata first, so a half-deleted artifact reads as missing)."""

    @abc.abstractmethod
    def _thread_keys(self) -> builtins.list[str]:
        """Every thread key that has storage."""

    def _finish_thread(self, key: str) -> bool:
        """Release per-thread storage once a thread has no artifacts; True if removed."""
        return False

    def _clean_orphans(self, key: str, *, older_than: datetime) -> int:
        """Remove leftovers of interrupted writes; returns how many."""
        return 0

    # -- shared logic ----------------------------------------------------------------------

    def _meta_for(self, key: str, artifact_id: str) -> dict[str, Any]:
        meta = self._read_meta(key, artifact_id)
        if meta is None:
            raise ArtifactNotFoundError(
                f"artifact {artifact_id} not found in this thread (deleted, expired or never "
                "stored)"
            )
        return meta

    def put(
        self,
        thread_id: str,
        content: str,
        *,
        source: str,
        kind: ArtifactKind,
        meta: Mapping[str, str] | None = None,
    ) -> ArtifactRef:
        """Store `content` and return its reference; see `ArtifactStore.put`.

        Raises:
            ArtifactIdError: The thread id is unusable.
            StorageError: The backend failed, or the text alone exceeds the quota.
        """
        key = thread_key(thread_id)
        if not isinstance(content, str):
            raise TypeError("content must be a str")
        if kind not in ("tool", "human", "archive"):
            raise ValueError(f"kind must be 'tool', 'human' or 'archive', got {kind!r}")
        artifact_id = make_artifact_id(thread_id, content)
        raw = content.encode("utf-8", "surrogatepass")
        if self.max_bytes_per_thread is not None and len(raw) > self.max_bytes_per_thread:
            raise StorageError(
                f"artifact of {len(raw):,} bytes exceeds the per-thread quota of "
                f"{self.max_bytes_per_thread:,} bytes (offload.max_bytes_per_thread)"
            )
        existing = self._read_meta(key, artifact_id)
        ref = ArtifactRef(
            artifact_id=artifact_id,
            thread_id=thread_id,
            source=printable(str(source))[:_MAX_META_VALUE],
            kind=kind,
            chars=len(content),
            tokens=estimate_tokens(content),
            size_bytes=len(raw),
            lines=content.count("\n") + 1,
            rows=count_rows(content) if existing is None else int(existing["rows"]),
            sha256=hashlib.sha256(raw).hexdigest(),
            created_at=self._clock().astimezone(UTC).isoformat(),
            preview=one_line_preview(content),
            meta={
                printable(str(k))[:64]: printable(str(v))[:_MAX_META_VALUE]
                for k, v in (meta or {}).items()
            },
        )
        self._write(key, artifact_id, content if existing is None else None, ref.to_dict())
        self._enforce_quota(key, keep=artifact_id)
        return ref

    def _enforce_quota(self, key: str, *, keep: str) -> None:
        if self.max_bytes_per_thread is None:
            return
        metas = sorted(self._list_meta(key), key=lambda m: str(m.get("created_at", "")))
        total = sum(int(m.get("size_bytes", 0)) for m in metas)
        for meta in metas:
            if total <= self.max_bytes_per_thread:
                break
            if meta.get("artifact_id") == keep:
                continue
            self._remove(key, str(meta["artifact_id"]), meta)
            total -= int(meta.get("size_bytes", 0))
            logger.info(
                "offload quota: evicted artifact %s of thread %s (%s bytes)",
                meta.get("artifact_id"),
                meta.get("thread_id"),
                meta.get("size_bytes"),
            )

    def get(self, thread_id: str, artifact_id: str) -> str:
        """Return the whole stored text; see `ArtifactStore.get`."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = self._meta_for(key, artifact_id)
        return "".join(self._pieces(key, artifact_id, meta))

    def get_ref(self, thread_id: str, artifact_id: str) -> ArtifactRef:
        """Return an artifact's reference; see `ArtifactStore.get_ref`."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        return ArtifactRef.from_dict(self._meta_for(key, artifact_id))

    def _rows(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Generator[ArtifactRow]:
        yield from iter_rows(self._pieces(key, artifact_id, meta))

    def read_page(
        self,
        thread_id: str,
        artifact_id: str,
        *,
        offset: int = 0,
        limit: int = 200,
        max_chars: int = DEFAULT_PAGE_CHARS,
    ) -> ArtifactPage:
        """Return a bounded page of rows; see `ArtifactStore.read_page`."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = self._meta_for(key, artifact_id)
        ref = ArtifactRef.from_dict(meta)
        offset, limit = max(0, int(offset)), max(1, int(limit))
        rows: list[ArtifactRow] = []
        used = 0
        next_offset: int | None = None
        with contextlib.closing(self._rows(key, artifact_id, meta)) as stream:
            for row in stream:
                if row.index < offset:
                    continue
                if len(rows) >= limit or (rows and used + len(row.text) > max_chars):
                    next_offset = row.index
                    break
                rows.append(row)
                used += len(row.text)
        return ArtifactPage(ref=ref, offset=offset, rows=tuple(rows), next_offset=next_offset)

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
        """Search an artifact's rows; see `ArtifactStore.search`.

        Raises:
            ValueError: The pattern is empty, too long or an invalid regex.
        """
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = self._meta_for(key, artifact_id)
        with contextlib.closing(self._rows(key, artifact_id, meta)) as stream:
            matches, complete, reason = search_rows(
                stream,
                pattern,
                regex=regex,
                max_matches=max_matches,
                timeout_seconds=timeout_seconds,
            )
        return ArtifactSearchResult(
            ref=ArtifactRef.from_dict(meta),
            pattern=pattern,
            regex=regex,
            matches=tuple(matches),
            complete=complete,
            stopped_reason=reason,
        )

    def list(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Return the thread's artifacts, oldest first."""
        metas = self._list_meta(thread_key(thread_id))
        refs = [ArtifactRef.from_dict(m) for m in metas]
        return sorted(refs, key=lambda r: (r.created_at, r.artifact_id))

    def delete(self, thread_id: str, artifact_id: str) -> bool:
        """Remove one artifact; False when it did not exist."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = self._read_meta(key, artifact_id)
        self._remove(key, artifact_id, meta)
        return meta is not None

    def delete_thread(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Remove every artifact of a thread (and its folder); returns what was removed."""
        key = thread_key(thread_id)
        removed = self.list(thread_id)
        for ref in removed:
            self._remove(key, ref.artifact_id, ref.to_dict())
        self._clean_orphans(key, older_than=datetime.max.replace(tzinfo=UTC))
        self._finish_thread(key)
        return removed

    def gc(
        self,
        *,
        now: datetime | None = None,
        max_age: timedelta | None = None,
        max_bytes_per_thread: int | None = None,
    ) -> GcReport:
        """Remove expired artifacts and enforce the quota in every thread.

        Args:
            now: The current time (default: the store's clock).
            max_age: Artifacts created before `now - max_age` go; `None` keeps them.
            max_bytes_per_thread: Per-thread quota (oldest go first); `None` for none.

        Returns:
            What was removed. Errors in one thread are logged and reported, not raised.
        """
        now = (now or self._clock()).astimezone(UTC)
        removed: list[ArtifactRef] = []
        finished: list[str] = []
        errors: list[str] = []
        orphans = 0
        keys = self._thread_keys()
        for key in keys:
            try:
                orphans += self._clean_orphans(key, older_than=now - timedelta(hours=1))
                metas = sorted(self._list_meta(key), key=lambda m: str(m.get("created_at", "")))
                total = sum(int(m.get("size_bytes", 0)) for m in metas)
                for meta in metas:
                    ref = ArtifactRef.from_dict(meta)
                    expired = max_age is not None and ref.created < now - max_age
                    over = max_bytes_per_thread is not None and total > max_bytes_per_thread
                    if not (expired or over):
                        continue
                    self._remove(key, ref.artifact_id, meta)
                    total -= ref.size_bytes
                    removed.append(ref)
                if not self._list_meta(key) and self._finish_thread(key):
                    finished.append(key)
            except (StorageError, OSError, ValueError) as exc:
                logger.error("offload gc failed for thread key %s: %s", key, exc)
                errors.append(f"{key}: {exc}")
        removed.sort(key=lambda r: r.created_at)
        return GcReport(
            removed=tuple(removed),
            freed_bytes=sum(r.size_bytes for r in removed),
            threads_scanned=len(keys),
            threads_removed=tuple(finished),
            orphans_removed=orphans,
            errors=tuple(errors),
        )

    # -- async twins (the primitives are blocking I/O; run them off the event loop) ---------

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
        return await asyncio.to_thread(
            self.put, thread_id, content, source=source, kind=kind, meta=meta
        )

    async def aget(self, thread_id: str, artifact_id: str) -> str:
        """Async twin of `get`."""
        return await asyncio.to_thread(self.get, thread_id, artifact_id)

    async def aget_ref(self, thread_id: str, artifact_id: str) -> ArtifactRef:
        """Async twin of `get_ref`."""
        return await asyncio.to_thread(self.get_ref, thread_id, artifact_id)

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
        return await asyncio.to_thread(
            self.read_page, thread_id, artifact_id, offset=offset, limit=limit, max_chars=max_chars
        )

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
        return await asyncio.to_thread(
            self.search,
            thread_id,
            artifact_id,
            pattern,
            regex=regex,
            max_matches=max_matches,
            timeout_seconds=timeout_seconds,
        )

    async def alist(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Async twin of `list`."""
        return await asyncio.to_thread(self.list, thread_id)

    async def adelete(self, thread_id: str, artifact_id: str) -> bool:
        """Async twin of `delete`."""
        return await asyncio.to_thread(self.delete, thread_id, artifact_id)

    async def adelete_thread(self, thread_id: str) -> builtins.list[ArtifactRef]:
        """Async twin of `delete_thread`."""
        return await asyncio.to_thread(self.delete_thread, thread_id)

    async def agc(
        self,
        *,
        now: datetime | None = None,
        max_age: timedelta | None = None,
        max_bytes_per_thread: int | None = None,
    ) -> GcReport:
        """Async twin of `gc`."""
        return await asyncio.to_thread(
            self.gc, now=now, max_age=max_age, max_bytes_per_thread=max_bytes_per_thread
        )
