"""The per-message count cache: fingerprints and counts, never message content.

An entry keeps what is needed to tell whether a message still has the content and tool calls
that were counted: their length and hash, not the objects. Content is never copied, and no
entry keeps a message's content (a base64 image, a large tool result) alive. The cache is
bounded by entries and by an approximate byte size.
"""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from foldwise.tokens._message import to_json

__all__ = [
    "CACHE_BYTES_LIMIT",
    "CACHE_LIMIT",
    "Entry",
    "MessageCache",
    "cache_key",
    "calls_print",
    "content_print",
    "same_value",
]

CACHE_LIMIT = 100_000
"""Per-message cache entries kept per counter; past it, the oldest tenth is dropped."""
CACHE_BYTES_LIMIT = 32 * 1024 * 1024
"""Approximate bytes the cache may retain per counter; past it, the oldest entries go."""
ENTRY_BYTES = 240
"""Approximate size of one entry: the entry object, its dict slot and small ints."""

# Type markers, so that `{"a": 1}` and `[["a", 1]]` do not fingerprint alike.
_DICT = object()
_LIST = object()
_NO_TEXT = -1


def _freeze(value: Any) -> Any:
    """Return a hashable image of a JSON-like value that references its strings, not copies.

    Hashing the image is O(number of nodes) when the strings were hashed before: CPython
    caches a string's hash on the object, so a large base64 block is hashed once.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return (_DICT, *[(key, _freeze(item)) for key, item in value.items()])
    if isinstance(value, list | tuple):
        return (_LIST, *map(_freeze, value))
    if value is None or isinstance(value, int | float):
        return (type(value), value)
    return to_json(value)  # anything else by its JSON form (as it is counted)


def content_print(content: Any) -> tuple[int, int]:
    """Return `(length, hash)` of a string content, or `(-1, structural hash)` of blocks."""
    if type(content) is str:
        return len(content), hash(content)
    return _NO_TEXT, hash(_freeze(content))


_SCALARS = frozenset({str, int, bool, type(None)})


def same_value(a: Any, b: Any) -> bool:
    """Whether two contents (or tool call lists) are equal down to the types of their values.

    `==` alone takes `1`, `1.0` and `True` for one another (and dicts in any key order), and
    their JSON, which is what is counted, differs.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is float:
        return repr(a) == repr(b)  # not `==`: -0.0 is sent as such
    if kind in _SCALARS:
        return bool(a == b)
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(same_value, a, b))
    if kind is dict:
        return list(a) == list(b) and all(map(same_value, a.values(), b.values()))
    return to_json(a) == to_json(b)  # anything else by its JSON form (as it is counted)


def calls_print(message: BaseMessage) -> int:
    """Return a hash of an AI message's tool calls and invalid tool calls (0 when none)."""
    if not isinstance(message, AIMessage):
        return 0
    calls, invalid = message.tool_calls, message.invalid_tool_calls
    if not calls and not invalid:
        return 0
    return hash(_freeze((calls, invalid))) or 1


def cache_key(message: BaseMessage) -> Any:
    """Cache key: the message id, or its role and a fingerprint of its content without one."""
    if message.id is not None:
        return message.id
    return (
        message.type,
        message.name,
        getattr(message, "tool_call_id", None),
        *content_print(message.content),
    )


def _call_id(message: BaseMessage) -> str | None:
    """A tool message's tool call id; not `getattr`, whose pydantic fallback raises and catches."""
    return message.tool_call_id if isinstance(message, ToolMessage) else None


class Entry:
    """One cached per-message count and a fingerprint of what it was computed from."""

    __slots__ = ("call_id", "calls", "digest", "is_ai", "kind", "length", "name", "size", "tokens")

    def __init__(self, message: BaseMessage, tokens: int, size: int) -> None:
        self.kind = type(message)
        self.name, self.call_id = message.name, _call_id(message)
        self.length, self.digest = content_print(message.content)
        self.is_ai = isinstance(message, AIMessage)
        self.calls = calls_print(message) if self.is_ai else 0
        self.tokens = tokens
        self.size = size

    def matches(self, message: BaseMessage) -> bool:
        """Return whether `message` still has the content, names and tool calls counted."""
        if (
            self.kind is not type(message)
            or self.name != message.name
            or self.call_id != _call_id(message)
        ):
            return False
        content = message.content
        if type(content) is str:
            # `hash` of the same string object is cached by CPython: O(1) on a re-check.
            if len(content) != self.length or hash(content) != self.digest:
                return False
        elif self.length != _NO_TEXT or hash(_freeze(content)) != self.digest:
            return False
        return not self.is_ai or self.calls == calls_print(message)


def _key_bytes(key: Any) -> int:
    if isinstance(key, str):
        return 50 + len(key)
    return 120 + sum(len(part) for part in key if isinstance(part, str))


class MessageCache:
    """Per-message counts by cache key, bounded by entries and by approximate bytes.

    Reads take no lock (a dict lookup is atomic); writes and evictions do. The oldest entries
    (by last write) are dropped first.
    """

    def __init__(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        """Create an empty cache; limits default to `CACHE_LIMIT` and `CACHE_BYTES_LIMIT`."""
        self.max_entries = CACHE_LIMIT if max_entries is None else max_entries
        self.max_bytes = CACHE_BYTES_LIMIT if max_bytes is None else max_bytes
        self.bytes = 0
        """Approximate bytes retained by the entries and their keys."""
        self._entries: dict[Any, Entry] = {}
        self._lock = threading.Lock()
        self.get = self._entries.get

    def __len__(self) -> int:
        return len(self._entries)

    def copy(self) -> MessageCache:
        """An independent cache with the same entries (entries are immutable, so shared)."""
        twin = MessageCache(self.max_entries, self.max_bytes)
        with self._lock:
            twin._entries.update(self._entries)
            twin.bytes = self.bytes
        return twin

    def put(self, key: Any, message: BaseMessage, tokens: int) -> None:
        """Record that `message` (under `key`) counts `tokens`."""
        entry = Entry(message, tokens, ENTRY_BYTES + _key_bytes(key))
        with self._lock:
            entries = self._entries
            old = entries.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            entries[key] = entry
            self.bytes += entry.size
            if len(entries) > self.max_entries:
                self._drop(max(1, self.max_entries // 10))
            while self.bytes > self.max_bytes and len(entries) > 1:
                self._drop(max(1, len(entries) // 10))

    def _drop(self, count: int) -> None:
        entries = self._entries
        for key in list(islice(entries, count)):
            self.bytes -= entries.pop(key).size
