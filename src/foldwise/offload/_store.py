"""`BaseArtifactStore`: the logic both artifact store backends share, written once.

A backend only provides a handful of primitives (write a text and its metadata, read the
metadata, open the text to read it in pieces, delete, list); everything else (id generation and
validation, dedupe, quota, paging, search, garbage collection) lives here once, so both
backends behave the same and pass one conformance suite.

The logic is written as step generators (`foldwise._steps`): `put_steps`, `read_page_steps`, ...
yield the I/O they need and the public `put` / `aput`, `read_page` / `aread_page`, ... run them
with the blocking or the async driver. The primitives are step generators too, so a backend
decides what its async I/O is: `StoreArtifactStore` awaits the LangGraph store's async methods;
`BlockingArtifactStore` (the filesystem) runs its blocking primitives in a worker thread.

Every public method validates the artifact id and maps the thread id to a safe key before a
primitive is called: a string that foldwise did not generate never reaches a backend.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from foldwise._crash import crash_point
from foldwise._steps import Io, Steps, async_method, sync_method
from foldwise._telemetry import record_offload
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
from foldwise.offload._rows import RowSplitter, count_rows
from foldwise.offload._search import DEFAULT_SEARCH_SECONDS, RowSearch
from foldwise.tokens import estimate_tokens

__all__ = ["DEFAULT_PAGE_CHARS", "ArtifactStore", "BaseArtifactStore", "PieceReader", "no_io"]

logger = logging.getLogger(__name__)

_MAX_META_VALUE = 200
_INLINE_CHARS = 32_000
"""Texts up to this size are described on the calling thread (the event loop, when async)."""
DEFAULT_PAGE_CHARS = 16_000
"""Default character bound of one page (about 4,000 tokens of English)."""

R = TypeVar("R")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def no_io(value: R) -> Steps[R]:
    """A step generator that needs no I/O and returns `value`."""
    yield from ()
    return value


def _by_age(metas: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
    return sorted(metas, key=lambda m: str(m.get("created_at", "")))


class PieceReader(Protocol):
    """An open stored text, read in pieces of bounded size."""

    def read_steps(self) -> Steps[str]:
        """The next piece; the empty string at the end."""
        ...

    def close(self) -> None:
        """Release the reader (cheap, never blocking)."""
        ...


class _RowCursor:
    """Rows of an open text, one at a time, reading the next piece only when needed."""

    def __init__(self, reader: PieceReader) -> None:
        self.reader = reader
        self._splitter = RowSplitter()
        self._pending: deque[ArtifactRow] = deque()
        self._ended = False

    def next_steps(self) -> Steps[ArtifactRow | None]:
        while not self._pending:
            if self._ended:
                return None
            piece = yield from self.reader.read_steps()
            if piece:
                self._pending.extend(self._splitter.feed(piece))
            else:
                self._pending.append(self._splitter.finish())
                self._ended = True
        return self._pending.popleft()

    def close(self) -> None:
        self.reader.close()


class BaseArtifactStore(abc.ABC):
    """Where offloaded texts live: generated ids, atomic writes, bounded reads, lifecycle.

    The one contract every artifact store backend implements (`ArtifactStore` names it), and
    the logic they share over a few backend primitives. Every method takes the owning
    `thread_id`: an artifact is only visible from its thread. Artifact ids that foldwise did
    not generate raise `ArtifactIdError` before any storage is touched; missing artifacts raise
    `ArtifactNotFoundError`; backend failures `StorageError`. Every public method `x` has an
    async twin `ax`; both run the step generator `x_steps`, where its signature is stated once.

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

    # -- primitives (step generators) -------------------------------------------------------

    @abc.abstractmethod
    def _write_steps(
        self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]
    ) -> Steps[None]:
        """Write the text (unless `content` is None: already stored) and then its metadata."""

    @abc.abstractmethod
    def _read_meta_steps(self, key: str, artifact_id: str) -> Steps[dict[str, Any] | None]:
        """The metadata dict, or None when the artifact is not (fully) stored."""

    @abc.abstractmethod
    def _list_meta_steps(self, key: str) -> Steps[builtins.list[dict[str, Any]]]:
        """Metadata of every complete artifact of a thread key."""

    @abc.abstractmethod
    def _open_steps(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Steps[PieceReader]:
        """Open the stored text for reading in pieces."""

    @abc.abstractmethod
    def _remove_steps(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> Steps[None]:
        """Delete an artifact (metadata first, so a half-deleted artifact reads as missing)."""

    @abc.abstractmethod
    def _thread_keys_steps(self) -> Steps[builtins.list[str]]:
        """Every thread key that has storage."""

    def _finish_thread_steps(self, key: str) -> Steps[bool]:
        """Release per-thread storage once a thread has no artifacts; True if removed."""
        return no_io(False)

    def _clean_orphans_steps(self, key: str, *, older_than: datetime) -> Steps[int]:
        """Remove leftovers of interrupted writes; returns how many."""
        return no_io(0)

    # -- shared logic ----------------------------------------------------------------------

    def _meta_steps(self, key: str, artifact_id: str) -> Steps[dict[str, Any]]:
        meta = yield from self._read_meta_steps(key, artifact_id)
        if meta is None:
            raise ArtifactNotFoundError(
                f"artifact {artifact_id} not found in this thread (deleted, expired or never "
                "stored)"
            )
        return meta

    def _describe(
        self,
        thread_id: str,
        content: str,
        raw: bytes,
        existing: Mapping[str, Any] | None,
        fields: tuple[str, ArtifactKind, Mapping[str, str] | None],
    ) -> ArtifactRef:
        rows = count_rows(content) if existing is None else int(existing["rows"])
        return self._new_ref(thread_id, content, raw, rows, fields)

    def _new_ref(
        self,
        thread_id: str,
        content: str,
        raw: bytes,
        rows: int,
        fields: tuple[str, ArtifactKind, Mapping[str, str] | None],
    ) -> ArtifactRef:
        source, kind, meta = fields
        return ArtifactRef(
            artifact_id=make_artifact_id(thread_id, content),
            thread_id=thread_id,
            source=printable(str(source))[:_MAX_META_VALUE],
            kind=kind,
            chars=len(content),
            tokens=estimate_tokens(content),
            size_bytes=len(raw),
            lines=content.count("\n") + 1,
            rows=rows,
            sha256=hashlib.sha256(raw).hexdigest(),
            created_at=self._clock().astimezone(UTC).isoformat(),
            preview=one_line_preview(content),
            meta={
                printable(str(k))[:64]: printable(str(v))[:_MAX_META_VALUE]
                for k, v in (meta or {}).items()
            },
        )

    def put_steps(
        self,
        thread_id: str,
        content: str,
        *,
        source: str,
        kind: ArtifactKind,
        meta: Mapping[str, str] | None = None,
    ) -> Steps[ArtifactRef]:
        """Store `content` (identical content in a thread is stored once) and return its ref.

        Raises:
            ArtifactIdError: The thread id is unusable.
            StorageError: The backend failed, or the text alone exceeds the quota.
        """
        started = time.perf_counter()
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
        existing = yield from self._read_meta_steps(key, artifact_id)
        # Counting rows, hashing and previewing a large text is CPU work: off the event loop.
        describe = Io.call if len(content) > _INLINE_CHARS else Io.pure
        ref: ArtifactRef = yield describe(
            self._describe, thread_id, content, raw, existing, (source, kind, meta)
        )
        crash_point("offload.write.before")  # tests only
        yield from self._write_steps(
            key, artifact_id, content if existing is None else None, ref.to_dict()
        )
        crash_point("offload.write.after")  # tests only
        yield from self._enforce_quota_steps(key, keep=artifact_id)
        record_offload(ref, new=existing is None, started=started)
        return ref

    def _enforce_quota_steps(self, key: str, *, keep: str) -> Steps[None]:
        if self.max_bytes_per_thread is None:
            return
        metas = _by_age((yield from self._list_meta_steps(key)))
        total = sum(int(m.get("size_bytes", 0)) for m in metas)
        for meta in metas:
            if total <= self.max_bytes_per_thread:
                break
            if meta.get("artifact_id") == keep:
                continue
            yield from self._remove_steps(key, str(meta["artifact_id"]), meta)
            total -= int(meta.get("size_bytes", 0))
            logger.info(
                "offload quota: evicted artifact %s of thread %s (%s bytes)",
                meta.get("artifact_id"),
                meta.get("thread_id"),
                meta.get("size_bytes"),
            )

    def get_steps(self, thread_id: str, artifact_id: str) -> Steps[str]:
        """Return the whole stored text."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = yield from self._meta_steps(key, artifact_id)
        parts: builtins.list[str] = []
        with contextlib.closing((yield from self._open_steps(key, artifact_id, meta))) as reader:
            while piece := (yield from reader.read_steps()):
                parts.append(piece)
        return "".join(parts)

    def get_ref_steps(self, thread_id: str, artifact_id: str) -> Steps[ArtifactRef]:
        """Return the reference of a stored artifact."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        return ArtifactRef.from_dict((yield from self._meta_steps(key, artifact_id)))

    def _rows_steps(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Steps[_RowCursor]:
        return _RowCursor((yield from self._open_steps(key, artifact_id, meta)))

    def read_page_steps(
        self,
        thread_id: str,
        artifact_id: str,
        *,
        offset: int = 0,
        limit: int = 200,
        max_chars: int = DEFAULT_PAGE_CHARS,
    ) -> Steps[ArtifactPage]:
        """Up to `limit` rows from row `offset`, bounded by `max_chars` (at least one row)."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = yield from self._meta_steps(key, artifact_id)
        offset, limit = max(0, int(offset)), max(1, int(limit))
        rows: builtins.list[ArtifactRow] = []
        used = 0
        next_offset: int | None = None
        with contextlib.closing((yield from self._rows_steps(key, artifact_id, meta))) as cursor:
            while (row := (yield from cursor.next_steps())) is not None:
                if row.index < offset:
                    continue
                if len(rows) >= limit or (rows and used + len(row.text) > max_chars):
                    next_offset = row.index
                    break
                rows.append(row)
                used += len(row.text)
        ref = ArtifactRef.from_dict(meta)
        return ArtifactPage(ref=ref, offset=offset, rows=tuple(rows), next_offset=next_offset)

    def search_steps(
        self,
        thread_id: str,
        artifact_id: str,
        pattern: str,
        *,
        regex: bool = False,
        max_matches: int = 20,
        timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> Steps[ArtifactSearchResult]:
        """Rows containing `pattern`, with a time budget.

        A regular expression runs in a killable child process (off the event loop in `asearch`).

        Raises:
            ValueError: The pattern is empty, too long or an invalid regex.
        """
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = yield from self._meta_steps(key, artifact_id)
        search = RowSearch(
            pattern, regex=regex, max_matches=max_matches, timeout_seconds=timeout_seconds
        )
        with contextlib.closing((yield from self._rows_steps(key, artifact_id, meta))) as cursor:
            while (row := (yield from cursor.next_steps())) is not None:
                if search.feed(row):
                    break
        matches, complete, reason = yield from search.finish_steps()
        return ArtifactSearchResult(
            ref=ArtifactRef.from_dict(meta),
            pattern=pattern,
            regex=regex,
            matches=tuple(matches),
            complete=complete,
            stopped_reason=reason,
        )

    def list_steps(self, thread_id: str) -> Steps[builtins.list[ArtifactRef]]:
        """Return the thread's artifacts, oldest first."""
        metas = yield from self._list_meta_steps(thread_key(thread_id))
        refs = [ArtifactRef.from_dict(m) for m in metas]
        return sorted(refs, key=lambda r: (r.created_at, r.artifact_id))

    def delete_steps(self, thread_id: str, artifact_id: str) -> Steps[bool]:
        """Remove one artifact; False when it did not exist."""
        key, artifact_id = thread_key(thread_id), validate_artifact_id(artifact_id)
        meta = yield from self._read_meta_steps(key, artifact_id)
        yield from self._remove_steps(key, artifact_id, meta)
        return meta is not None

    def delete_thread_steps(self, thread_id: str) -> Steps[builtins.list[ArtifactRef]]:
        """Remove every artifact of a thread (and its folder); returns what was removed."""
        key = thread_key(thread_id)
        removed = yield from self.list_steps(thread_id)
        for ref in removed:
            yield from self._remove_steps(key, ref.artifact_id, ref.to_dict())
        yield from self._clean_orphans_steps(key, older_than=datetime.max.replace(tzinfo=UTC))
        yield from self._finish_thread_steps(key)
        return removed

    def gc_steps(
        self,
        *,
        now: datetime | None = None,
        max_age: timedelta | None = None,
        max_bytes_per_thread: int | None = None,
    ) -> Steps[GcReport]:
        """Remove expired artifacts and enforce the quota in every thread.

        Args:
            now: The current time (default: the store's clock).
            max_age: Artifacts created before `now - max_age` go; `None` keeps them.
            max_bytes_per_thread: Per-thread quota (oldest go first); `None` for none.

        Returns:
            What was removed. Errors in one thread are logged and reported, not raised.
        """
        now = (now or self._clock()).astimezone(UTC)
        removed: builtins.list[ArtifactRef] = []
        finished: builtins.list[str] = []
        errors: builtins.list[str] = []
        orphans = 0
        keys = yield from self._thread_keys_steps()
        for key in keys:
            try:
                orphans += yield from self._clean_orphans_steps(
                    key, older_than=now - timedelta(hours=1)
                )
                expired = now - max_age if max_age is not None else None
                removed += yield from self._gc_thread_steps(key, expired, max_bytes_per_thread)
                empty = not (yield from self._list_meta_steps(key))
                if empty and (yield from self._finish_thread_steps(key)):
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

    def _gc_thread_steps(
        self, key: str, created_before: datetime | None, quota: int | None
    ) -> Steps[builtins.list[ArtifactRef]]:
        metas = _by_age((yield from self._list_meta_steps(key)))
        total = sum(int(m.get("size_bytes", 0)) for m in metas)
        removed: builtins.list[ArtifactRef] = []
        for meta in metas:
            ref = ArtifactRef.from_dict(meta)
            expired = created_before is not None and ref.created < created_before
            if not (expired or (quota is not None and total > quota)):
                continue
            yield from self._remove_steps(key, ref.artifact_id, meta)
            total -= ref.size_bytes
            removed.append(ref)
        return removed

    # -- the public sync and async methods: each runs its step generator --------------------

    put = sync_method(put_steps)
    aput = async_method(put_steps)
    get = sync_method(get_steps)
    aget = async_method(get_steps)
    get_ref = sync_method(get_ref_steps)
    aget_ref = async_method(get_ref_steps)
    read_page = sync_method(read_page_steps)
    aread_page = async_method(read_page_steps)
    search = sync_method(search_steps)
    asearch = async_method(search_steps)
    list = sync_method(list_steps)
    alist = async_method(list_steps)
    delete = sync_method(delete_steps)
    adelete = async_method(delete_steps)
    delete_thread = sync_method(delete_thread_steps)
    adelete_thread = async_method(delete_thread_steps)
    gc = sync_method(gc_steps)
    agc = async_method(gc_steps)


ArtifactStore = BaseArtifactStore
"""The artifact store contract: `BaseArtifactStore`, which every backend derives from."""
