"""What is new in a thread's history since the last model call, found in O(1).

Hooks that run before every model call (durable capture, the pasted-input check) only need to
look at messages added since their previous call. `NewMessages.since` remembers, per thread,
how long the history was and the id of its last message; when that message still stands at
the same position, the prefix is taken as unchanged (LangGraph's `add_messages` appends, and a
compaction removes messages, which moves or drops the remembered one) and only the tail is
returned. Anything else (a first call, a compaction, an edited history) returns `None`: the
caller scans the whole history, so a miss costs time, never correctness.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TypeVar

from langchain_core.messages import BaseMessage

from foldwise._lru import LRUDict

__all__ = ["CheckedTexts", "NewMessages"]

M = TypeVar("M", bound=BaseMessage)


class NewMessages:
    """Per-thread memory of the last history seen by one hook."""

    def __init__(self, limit: int = 1024) -> None:
        self._seen: LRUDict[str, tuple[int, str | None]] = LRUDict(limit)
        self._lock = threading.Lock()

    def since(self, key: str, messages: Sequence[M]) -> Sequence[M] | None:
        """The messages added since the last call for `key`, or `None` when unknown."""
        last_id = messages[-1].id if messages else None
        with self._lock:
            previous = self._seen.get(key)
            self._seen[key] = (len(messages), last_id)
        if previous is None:
            return None
        length, seen_id = previous
        if seen_id is None or length == 0 or length > len(messages):
            return None
        if messages[length - 1].id != seen_id:
            return None
        return messages[length:]

    def forget(self, key: str) -> None:
        """Drop what is remembered for `key` (its next call scans everything)."""
        with self._lock:
            self._seen.pop(key, None)


class CheckedTexts:
    """Texts already found under a limit, by thread and message id, with a fingerprint each.

    A run start rescans the whole history (it may have been edited between runs), decoded
    anew: other objects, mostly the same texts. A text whose fingerprint (length and hash)
    is the one it had when it was found under the limit is not counted again; an edited text
    has another fingerprint and is. Bounded (the least recently added are forgotten: counted
    again); safe across threads.
    """

    def __init__(self, limit: int = 20_000) -> None:
        self._seen: LRUDict[tuple[str, str], tuple[int, int]] = LRUDict(limit)
        self._lock = threading.Lock()

    def known(self, key: str, message_id: str, text: str) -> bool:
        """Whether `text` is the one found under the limit for this message of `key`."""
        return self._seen.get((key, message_id)) == (len(text), hash(text))

    def add(self, key: str, message_id: str, text: str) -> None:
        """Remember that this message of `key` has `text`, found under the limit."""
        with self._lock:
            self._seen[(key, message_id)] = (len(text), hash(text))
