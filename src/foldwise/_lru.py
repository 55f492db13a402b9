"""A small bounded mapping for per-thread bookkeeping in long-running processes."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

__all__ = ["LRUDict"]

K = TypeVar("K")
V = TypeVar("V")


class LRUDict(OrderedDict[K, V]):
    """An `OrderedDict` that forgets its least recently written keys beyond `maxsize`.

    Used for per-thread state kept by middleware (measured static tokens, per-run compaction
    counts, failure streaks) so a gateway serving many threads does not grow without bound.
    """

    def __init__(self, maxsize: int = 10_000) -> None:
        super().__init__()
        if maxsize <= 0:
            raise ValueError("maxsize must be positive")
        self.maxsize = maxsize

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)
