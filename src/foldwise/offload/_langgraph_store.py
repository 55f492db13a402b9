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
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from langgraph.store.base import BaseStore, Item

from foldwise._steps import Io, Steps, perform
from foldwise.errors import StorageError
from foldwise.offload._ids import ARTIFACT_ID_PATTERN
from foldwise.offload._store import BaseArtifactStore, PieceReader, no_io

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


def _get(store: BaseStore, namespace: tuple[str, ...], key: str) -> Steps[Item | None]:
    return (yield from perform(Io.of(store.get, store.aget, namespace, key)))


def _put(
    store: BaseStore, namespace: tuple[str, ...], key: str, value: dict[str, Any]
) -> Steps[None]:
    # index=False: artifacts are never embedded.
    yield Io.of(store.put, store.aput, namespace, key, value, index=False)


def _delete(store: BaseStore, namespace: tuple[str, ...], key: str) -> Steps[None]:
    yield Io.of(store.delete, store.adelete, namespace, key)


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

    def _write_steps(
        self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]
    ) -> Steps[None]:
        try:
            if content is not None:
                size = self.chunk_chars
                starts = range(0, max(1, len(content)), size)
                for index, start in enumerate(starts):
                    chunk = _encode_chunk(content[start : start + size])
                    chunk_key = self._chunk_key(artifact_id, index)
                    yield from _put(self.store, self._chunks_ns(key), chunk_key, chunk)
                chunks = len(starts)
            else:
                previous = yield from self._read_meta_steps(key, artifact_id)
                chunks = int((previous or {}).get("chunks", 0))
            value = {**meta, "chunks": chunks}
            yield from _put(self.store, self._refs_ns(key), artifact_id, value)
        except StorageError:
            raise
        except Exception as exc:  # any backend error: the caller falls back, nothing dangles
            raise StorageError(f"cannot store artifact {artifact_id}: {exc}") from exc

    def _read_meta_steps(self, key: str, artifact_id: str) -> Steps[dict[str, Any] | None]:
        try:
            item = yield from _get(self.store, self._refs_ns(key), artifact_id)
        except Exception as exc:
            raise StorageError(f"cannot read artifact {artifact_id}: {exc}") from exc
        return None if item is None else dict(item.value)

    def _search_all_steps(self, namespace: tuple[str, ...], what: str) -> Steps[builtins.list[Any]]:
        """Every item directly in `namespace`, page by page."""
        found: builtins.list[Any] = []
        while True:
            try:
                items = yield from perform(
                    Io.of(
                        self.store.search,
                        self.store.asearch,
                        namespace,
                        limit=_PAGE,
                        offset=len(found),
                    )
                )
            except Exception as exc:
                raise StorageError(f"cannot list {what}: {exc}") from exc
            found.extend(items)
            if len(items) < _PAGE:
                return [item for item in found if item.namespace == namespace]

    def _list_meta_steps(self, key: str) -> Steps[builtins.list[dict[str, Any]]]:
        items = yield from self._search_all_steps(self._refs_ns(key), "artifacts")
        return [dict(i.value) for i in items if ARTIFACT_ID_PATTERN.fullmatch(i.key)]

    def _open_steps(self, key: str, artifact_id: str, meta: dict[str, Any]) -> Steps[PieceReader]:
        chunks = [self._chunk_key(artifact_id, i) for i in range(int(meta.get("chunks", 0)))]
        return (
            yield from no_io(_ChunkReader(self.store, self._chunks_ns(key), artifact_id, chunks))
        )

    def _remove_steps(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> Steps[None]:
        try:
            yield from _delete(self.store, self._refs_ns(key), artifact_id)
            for index in range(int((meta or {}).get("chunks", 0))):
                chunk_key = self._chunk_key(artifact_id, index)
                yield from _delete(self.store, self._chunks_ns(key), chunk_key)
        except Exception as exc:
            raise StorageError(f"cannot delete artifact {artifact_id}: {exc}") from exc

    def _thread_keys_steps(self) -> Steps[builtins.list[str]]:
        keys: set[str] = set()
        for prefix in (REFS_NAMESPACE, CHUNKS_NAMESPACE):
            offset = 0
            while True:
                found = yield from perform(
                    Io.of(
                        self.store.list_namespaces,
                        self.store.alist_namespaces,
                        prefix=prefix,
                        max_depth=len(prefix) + 1,
                        limit=_PAGE,
                        offset=offset,
                    )
                )
                keys.update(ns[len(prefix)] for ns in found if len(ns) > len(prefix))
                if len(found) < _PAGE:
                    break
                offset += len(found)
        return sorted(keys)

    def _clean_orphans_steps(self, key: str, *, older_than: datetime) -> Steps[int]:
        """Delete chunks whose artifact has no reference (an interrupted write)."""
        complete = {str(m["artifact_id"]) for m in (yield from self._list_meta_steps(key))}
        items = yield from self._search_all_steps(self._chunks_ns(key), "artifact chunks")
        stale = [
            item.key
            for item in items
            if item.key.partition(":")[0] not in complete and item.updated_at < older_than
        ]
        try:
            for chunk_key in stale:
                yield from _delete(self.store, self._chunks_ns(key), chunk_key)
        except Exception as exc:
            raise StorageError(f"cannot delete orphaned chunks: {exc}") from exc
        return len(stale)


class _ChunkReader:
    """Reads an artifact's chunks one store call at a time."""

    def __init__(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        artifact_id: str,
        chunk_keys: builtins.list[str],
    ) -> None:
        self.store, self.namespace, self.artifact_id = store, namespace, artifact_id
        self._keys = deque(chunk_keys)

    def read_steps(self) -> Steps[str]:
        if not self._keys:
            return ""
        chunk_key = self._keys.popleft()
        try:
            item = yield from _get(self.store, self.namespace, chunk_key)
        except Exception as exc:
            raise StorageError(f"cannot read artifact {self.artifact_id}: {exc}") from exc
        if item is None:
            raise StorageError(f"chunk {chunk_key} of artifact {self.artifact_id} is missing")
        return _decode_chunk(item.value)

    def close(self) -> None:
        self._keys.clear()
