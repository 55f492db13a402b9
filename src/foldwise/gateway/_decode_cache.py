"""`OnceDecodedSerializer`: a large checkpoint blob read twice in a row is decoded once.

Starting a run reads the thread's head checkpoint twice: the gateway reads it to check the
input against the history (`RunManager._prepare`), then LangGraph's loop reads it to run from
it. Decoding is the expensive part (every message rebuilt and validated: about 14 ms for 400
messages), and it was paid twice per run.

Only a read made inside `keeping_decodes()` (the gateway's input check, which changes nothing
it reads) keeps what it decoded from a large blob (`min_bytes` and up); the next read of the
same bytes, by anyone, is given it once, and the read after that decodes again. Other readers
never keep: LangGraph's loop and `update_state` hand the values to reducers and nodes, which
may change them in place (an in-place reducer, a node that edits a message and returns it),
and a kept value changed so would be served as a checkpoint it no longer matches.
The two readers get their own dicts, lists and tuples (copied all the way down), so changing
one reader's containers never shows in the other's; the other objects in them (messages,
entries) are shared, which is safe because the keeper only reads them. Bytes are compared
whole before anything is reused. Bounded: at most `max_bytes` of blobs and `max_entries`
entries, least recently stored first out.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["OnceDecodedSerializer", "keeping_decodes", "read_kept"]

T = TypeVar("T")

_KEEPING: contextvars.ContextVar[bool] = contextvars.ContextVar("foldwise_keeping", default=False)


@contextmanager
def keeping_decodes() -> Iterator[None]:
    """Large decodes read in this block are kept for the next read of the same bytes.

    Only for readers that never change what they read: the kept value's objects are shared
    with the next reader.
    """
    token = _KEEPING.set(True)
    try:
        yield
    finally:
        _KEEPING.reset(token)


async def read_kept(read: Awaitable[T]) -> T:
    """Await `read` (a checkpoint read that changes nothing it reads) in `keeping_decodes`."""
    with keeping_decodes():
        return await read


def _fresh(value: Any) -> Any:
    """`value` with its dicts, lists and tuples copied all the way down (other objects shared).

    Tuples count: a `DeltaChannel` snapshot (a named tuple) holds the channel's list.
    """
    kind = type(value)
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    if kind is tuple:
        return tuple(_fresh(item) for item in value)
    if isinstance(value, tuple) and hasattr(kind, "_make"):
        return kind._make(_fresh(item) for item in value)
    if kind is set:
        return set(value)
    return value


class OnceDecodedSerializer(JsonPlusSerializer):
    """`JsonPlusSerializer` whose large decodes (in `keeping_decodes`) serve the next read once.

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
            return kept[1]  # the keeper has its own copy of the containers
        value = super().loads_typed(data)
        if not _KEEPING.get() or len(blob) > self.max_bytes:
            return value
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
