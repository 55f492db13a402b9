"""`BlockingArtifactStore`: a backend whose primitives are blocking calls (files, a local DB).

The backend writes plain blocking primitives (`_write`, `_read_meta`, ...); this base turns each
into the step primitive `BaseArtifactStore` needs with `Io.call`, so the sync driver calls it
directly and the async driver runs it in a worker thread: `fsync` never runs on the event loop.
"""

from __future__ import annotations

import abc
import builtins
from datetime import datetime
from typing import Any, Protocol

from foldwise._steps import Io, Steps, perform
from foldwise.offload._store import BaseArtifactStore, PieceReader

__all__ = ["BlockingArtifactStore", "TextHandle"]

PIECE_CHARS = 64 * 1024
"""Characters read from an open text at a time."""


class TextHandle(Protocol):
    """An open text file (what `open(..., encoding=...)` returns)."""

    def read(self, size: int, /) -> str:
        """Up to `size` characters; the empty string at the end."""
        ...

    def close(self) -> None:
        """Close the file."""
        ...


class _BlockingReader:
    """Reads an open text in pieces, each read a blocking call."""

    def __init__(self, handle: TextHandle) -> None:
        self.handle = handle

    def read_steps(self) -> Steps[str]:
        return (yield from perform(Io.call(self.handle.read, PIECE_CHARS)))

    def close(self) -> None:
        self.handle.close()


class BlockingArtifactStore(BaseArtifactStore):
    """`BaseArtifactStore` over blocking primitives; async callers run them in a worker thread."""

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
    def _open_text(self, key: str, artifact_id: str, meta: dict[str, Any]) -> TextHandle:
        """The stored text, open for reading."""

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

    # -- the step primitives: one blocking call each ----------------------------------------

    def _write_steps(
        self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]
    ) -> Steps[None]:
        yield Io.call(self._write, key, artifact_id, content, meta)

    def _read_meta_steps(self, key: str, artifact_id: str) -> Steps[dict[str, Any] | None]:
        return (yield from perform(Io.call(self._read_meta, key, artifact_id)))

    def _list_meta_steps(self, key: str) -> Steps[builtins.list[dict[str, Any]]]:
        return (yield from perform(Io.call(self._list_meta, key)))

    def _open_steps(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Steps[PieceReader]:
        return _BlockingReader(
            (yield from perform(Io.call(self._open_text, key, artifact_id, meta)))
        )

    def _remove_steps(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> Steps[None]:
        yield Io.call(self._remove, key, artifact_id, meta)

    def _thread_keys_steps(self) -> Steps[builtins.list[str]]:
        return (yield from perform(Io.call(self._thread_keys)))

    def _finish_thread_steps(self, key: str) -> Steps[bool]:
        return (yield from perform(Io.call(self._finish_thread, key)))

    def _clean_orphans_steps(self, key: str, *, older_than: datetime) -> Steps[int]:
        return (yield from perform(Io.call(self._clean_orphans, key, older_than=older_than)))
