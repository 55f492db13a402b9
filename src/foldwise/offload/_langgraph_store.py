r"""`StoreArtifactStore`: artifacts in a LangGraph `BaseStore` (in-memory, Postgres, ...).

Layout: the reference of each artifact is an item in namespace
`("foldwise", "artifacts", <thread key>)` under its artifact id; the text is split into chunks
of `chunk_chars` characters stored in `("foldwise", "artifact_chunks", <thread key>)` under
`<artifact id>:<n>`. Chunks are written first and the reference last, so an artifact is visible
only once complete; deletion removes the reference first. Reads fetch one chunk at a time.

Chunks holding text that some databases refuse (NUL, unpaired surrogates; Postgres `jsonb`
cannot store `\u0000`) are stored base64-encoded, so every text round-trips exactly.
"""

from __future__ import annotations

import base64
import builtins
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore

from foldwise.errors import StorageError
from foldwise.offload._ids import ARTIFACT_ID_PATTERN
from foldwise.offload._store import BaseArtifactStore

__all__ = ["CHUNKS_NAMESPACE", "REFS_NAMESPACE", "StoreArtifactStore"]

REFS_NAMESPACE = ("foldwise", "artifacts")
"""Prefix of the namespaces holding artifact references (one per thread key)."""
CHUNKS_NAMESPACE = ("foldwise", "artifact_chunks")
"""Prefix of the namespaces holding artifact text chunks."""

_PAGE = 100
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def _encode_chunk(text: str) -> dict[str, str]:
    if _UNSAFE.search(text):
        return {"b64": base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")}
    return {"text": text}


def _decode_chunk(value: dict[str, Any]) -> str:
    if "text" in value:
        return str(value["text"])
    return base64.b64decode(value["b64"]).decode("utf-8", "surrogatepass")


class StoreArtifactStore(BaseArtifactStore):
    """Artifacts in a LangGraph `BaseStore`, so several workers can share them.

    Args:
        store: Any `BaseStore` (`InMemoryStore`, `PostgresStore`, ...). Items are written with
            `index=False`: artifacts are never embedded.
        chunk_chars: Characters per stored chunk.
        max_bytes_per_thread: Quota enforced after every write; `None` for none.
        clock: Current time (aware UTC); injectable for tests.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        chunk_chars: int = 64 * 1024,
        max_bytes_per_thread: int | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(max_bytes_per_thread=max_bytes_per_thread, clock=clock)
        if chunk_chars <= 0:
            raise ValueError("chunk_chars must be positive")
        self.store = store
        self.chunk_chars = chunk_chars

    def __repr__(self) -> str:
        return f"StoreArtifactStore({type(self.store).__name__})"

    @staticmethod
    def _refs_ns(key: str) -> tuple[str, ...]:
        return (*REFS_NAMESPACE, key)

    @staticmethod
    def _chunks_ns(key: str) -> tuple[str, ...]:
        return (*CHUNKS_NAMESPACE, key)

    @staticmethod
    def _chunk_key(artifact_id: str, index: int) -> str:
        return f"{artifact_id}:{index:06d}"

    def _write(self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]) -> None:
        try:
            if content is not None:
                size = self.chunk_chars
                starts = range(0, max(1, len(content)), size)
                for index, start in enumerate(starts):
                    self.store.put(
                        self._chunks_ns(key),
                        self._chunk_key(artifact_id, index),
                        _encode_chunk(content[start : start + size]),
                        index=False,
                    )
                chunks = len(starts)
            else:
                previous = self._read_meta(key, artifact_id)
                chunks = int((previous or {}).get("chunks", 0))
            self.store.put(self._refs_ns(key), artifact_id, {**meta, "chunks": chunks}, index=False)
        except StorageError:
            raise
        except Exception as exc:  # any backend error: the caller falls back, nothing dangles
            raise StorageError(f"cannot store artifact {artifact_id}: {exc}") from exc

    def _read_meta(self, key: str, artifact_id: str) -> dict[str, Any] | None:
        try:
            item = self.store.get(self._refs_ns(key), artifact_id)
        except Exception as exc:
            raise StorageError(f"cannot read artifact {artifact_id}: {exc}") from exc
        if item is None:
            return None
        return dict(item.value)

    def _list_meta(self, key: str) -> builtins.list[dict[str, Any]]:
        metas: list[dict[str, Any]] = []
        offset = 0
        while True:
            try:
                items = self.store.search(self._refs_ns(key), limit=_PAGE, offset=offset)
            except Exception as exc:
                raise StorageError(f"cannot list artifacts: {exc}") from exc
            for item in items:
                if item.namespace == self._refs_ns(key) and ARTIFACT_ID_PATTERN.fullmatch(item.key):
                    metas.append(dict(item.value))
            if len(items) < _PAGE:
                return metas
            offset += len(items)

    def _pieces(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Iterator[str]:
        for index in range(int(meta.get("chunks", 0))):
            try:
                item = self.store.get(self._chunks_ns(key), self._chunk_key(artifact_id, index))
            except Exception as exc:
                raise StorageError(f"cannot read artifact {artifact_id}: {exc}") from exc
            if item is None:
                raise StorageError(f"chunk {index} of artifact {artifact_id} is missing")
            yield _decode_chunk(item.value)

    def _remove(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> None:
        try:
            self.store.delete(self._refs_ns(key), artifact_id)
            for index in range(int((meta or {}).get("chunks", 0))):
                self.store.delete(self._chunks_ns(key), self._chunk_key(artifact_id, index))
        except Exception as exc:
            raise StorageError(f"cannot delete artifact {artifact_id}: {exc}") from exc

    def _thread_keys(self) -> builtins.list[str]:
        keys: set[str] = set()
        for prefix in (REFS_NAMESPACE, CHUNKS_NAMESPACE):
            offset = 0
            while True:
                found = self.store.list_namespaces(
                    prefix=prefix, max_depth=len(prefix) + 1, limit=_PAGE, offset=offset
                )
                keys.update(ns[len(prefix)] for ns in found if len(ns) > len(prefix))
                if len(found) < _PAGE:
                    break
                offset += len(found)
        return sorted(keys)

    def _clean_orphans(self, key: str, *, older_than: datetime) -> int:
        """Delete chunks whose artifact has no reference (an interrupted write)."""
        complete = {str(m["artifact_id"]) for m in self._list_meta(key)}
        removed = 0
        offset = 0
        stale: list[str] = []
        while True:
            items = self.store.search(self._chunks_ns(key), limit=_PAGE, offset=offset)
            for item in items:
                owner = item.key.partition(":")[0]
                if owner not in complete and item.updated_at < older_than:
                    stale.append(item.key)
            if len(items) < _PAGE:
                break
            offset += len(items)
        for chunk_key in stale:
            self.store.delete(self._chunks_ns(key), chunk_key)
            removed += 1
        return removed
