"""A LangGraph store that only works asynchronously, like `AsyncPostgresStore` on its loop."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore

__all__ = ["AsyncOnlyStore", "SyncStoreCallError"]


class SyncStoreCallError(AssertionError):
    """A blocking store method was called where only the async ones may be."""


class AsyncOnlyStore(BaseStore):
    """An `InMemoryStore` reachable only through `abatch` (and so `aget`, `aput`, ...).

    Every sync method (`get`, `put`, `search`, ... all go through `batch`) raises, as an
    `AsyncBatchedBaseStore` does when called from its event loop, and records the call so a
    test can assert that none happened even where the error was caught and logged.
    """

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.sync_calls: list[str] = []
        self.async_calls = 0
        self._lock = threading.Lock()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        names = [type(op).__name__ for op in ops]
        with self._lock:
            self.sync_calls.extend(names)
        raise SyncStoreCallError(f"sync store call {names} on an async-only store")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        with self._lock:
            self.async_calls += 1
        return await self.inner.abatch(ops)

    def snapshot(self) -> dict[str, Any]:
        """Every stored item, for assertions (reads the wrapped store directly)."""
        return {
            "/".join((*item.namespace, item.key)): item.value
            for item in self.inner.search((), limit=100_000)
        }
