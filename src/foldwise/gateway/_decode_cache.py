"""`OnceDecodedSerializer`: a large checkpoint blob read twice in a row is decoded once.

Starting a run reads the thread's head checkpoint twice: the gateway reads it to check the
input against the history (`RunManager._prepare`), then LangGraph's loop reads it to run from
it. Decoding is the expensive part (every message rebuilt and validated: about 14 ms for 400
messages), and it was paid twice per run.

This serializer keeps what it decoded from a large blob (`min_bytes` and up) and gives it to
the next read of the same bytes, once; the read after that decodes again. The two readers get
their own dicts and lists (copied down to `_COPY_DEPTH` levels: the checkpoint, its channel
values, each channel's list), so changing one reader's containers never shows in the other's;
the objects in them (messages, entries) are shared, as LangGraph's reducers and foldwise's
never change a stored value in place. Bytes are compared whole before anything is reused.
Bounded: at most `max_bytes` of blobs and `max_entries` entries, least recently stored first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["OnceDecodedSerializer"]

_COPY_DEPTH = 3


def _fresh(value: Any, depth: int = _COPY_DEPTH) -> Any:
    """`value` with its dicts and lists copied down to `depth` levels (the leaves shared)."""
    if depth == 0:
        return value
    if type(value) is dict:
        return {key: _fresh(item, depth - 1) for key, item in value.items()}
    if type(value) is list:
        return [_fresh(item, depth - 1) for item in value]
    return value


class OnceDecodedSerializer(JsonPlusSerializer):
    """`JsonPlusSerializer` whose large decodes serve the next identical read once.

    Args:
        min_bytes: Blobs smaller than this are always decoded (cheap anyway).
        max_bytes: The most blob bytes kept, over all entries.
        max_entries: The most entries kept.
        **kwargs: For `JsonPlusSerializer`.
    """

    def __init__(
        self,
        *,
        min_bytes: int = 16 * 1024,
        max_bytes: int = 64 * 1024 * 1024,
        max_entries: int = 256,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._kept: OrderedDict[tuple[int, int], tuple[bytes, Any]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()  # savers decode in their worker threads

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_ != "msgpack" or type(blob) is not bytes or len(blob) < self.min_bytes:
            return super().loads_typed(data)
        key = (len(blob), hash(blob))
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is not None:
                self._total -= len(kept[0])
        if kept is not None and kept[0] == blob:
            return _fresh(kept[1])
        value = super().loads_typed(data)
        if len(blob) <= self.max_bytes:
            self._keep(key, blob, value)
        return _fresh(value)

    def _keep(self, key: tuple[int, int], blob: bytes, value: Any) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._total -= len(old[0])
            self._kept[key] = (blob, value)
            self._total += len(blob)
            while self._total > self.max_bytes or len(self._kept) > self.max_entries:
                _, (dropped, _) = self._kept.popitem(last=False)
                self._total -= len(dropped)

    def forget(self) -> None:
        """Drop everything kept."""
        with self._lock:
            self._kept.clear()
            self._total = 0
