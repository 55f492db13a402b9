"""`TokenCounter`: cached per-message counts, an incremental history total, usage anchoring."""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from foldwise.tokens._message import message_tokens, to_json

__all__ = ["CACHE_LIMIT", "RequestCount", "TokenCounter"]

logger = logging.getLogger(__name__)

CACHE_LIMIT = 100_000
"""Per-message cache entries kept per counter; past it, the oldest tenth is dropped."""
TOOL_SCHEMA_OVERHEAD = 8
"""Framing tokens added per tool schema (the provider wraps each definition)."""
_SNAPSHOT_LIMIT = 64
_ANCHOR_LIMIT = 10_000
_TOOL_LIMIT = 4_096
_RECHECK_TAIL = 256
_INLINE_CHARS = 2_048

_get_content = attrgetter("content")


@dataclass(frozen=True, slots=True)
class RequestCount:
    """Token count of one model request, from `TokenCounter.count_request`."""

    total: int
    """What the request costs: the anchored figure when `anchored`, else `messages + static`."""
    messages: int
    """Plain estimate of the messages alone (the sum of per-message counts)."""
    static: int
    """The `static_tokens` passed in (system prompt, tool schemas, rendered context...)."""
    anchored: bool
    """Whether `total` is provider-reported usage plus an estimate of the messages since."""


class _TextPrint:
    """Length and hash of a long string: what a cache entry keeps instead of the string.

    Compares equal to a string of the same length and hash (CPython caches a string's hash, so
    re-checking the same object is O(1)). Keeps the cache from pinning large tool results.
    """

    __slots__ = ("digest", "length")

    def __init__(self, text: str) -> None:
        self.length = len(text)
        self.digest = hash(text)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _TextPrint):
            return self.length == other.length and self.digest == other.digest
        return isinstance(other, str) and len(other) == self.length and hash(other) == self.digest

    def __hash__(self) -> int:
        return self.digest


class _Entry:
    """One cached per-message count and what it was computed from."""

    __slots__ = ("calls", "calls_ref", "content", "is_ai", "kind", "tokens")

    def __init__(self, message: BaseMessage, tokens: int) -> None:
        content = message.content
        self.kind = type(message)
        # Short strings by reference (immutable; `is` makes the hit check O(1)), long ones by
        # fingerprint so the cache does not keep them alive; lists are copied so in-place
        # edits are noticed.
        self.content: Any
        if isinstance(content, str):
            self.content = content if len(content) <= _INLINE_CHARS else _TextPrint(content)
        else:
            self.content = copy.deepcopy(content)
        self.is_ai = isinstance(message, AIMessage)
        # The tool-call list object (an identity fast path) and a deep copy to compare against.
        self.calls_ref = message.tool_calls if isinstance(message, AIMessage) else None
        self.calls = copy.deepcopy(_calls_of(message)) if self.is_ai else None
        self.tokens = tokens

    def matches(self, message: BaseMessage) -> bool:
        """Return whether `message` still has the content and tool calls that were counted."""
        content = message.content
        return (
            self.kind is type(message)
            and (self.content is content or self.content == content)
            and (not self.is_ai or self.same_calls(message))
        )

    def same_calls(self, message: BaseMessage) -> bool:
        """Return whether an AI message's tool calls are those that were counted."""
        calls = message.tool_calls  # type: ignore[attr-defined]
        if calls is self.calls_ref and not message.invalid_tool_calls:  # type: ignore[attr-defined]
            return self.calls is None or not self.calls[1]
        return bool(self.calls == _calls_of(message))


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The last history counted for one conversation, so an append costs O(new messages)."""

    messages: list[BaseMessage]
    contents: list[Any]  # each message's content object when it was counted
    cumulative: list[int]  # cumulative[i] = sum of the counts of messages[:i]
    prefix_ids: list[int]  # prefix_ids[i] = rolling hash of the cache keys of messages[:i]
    anchor: int  # index of the last AIMessage with usage, -1 if none
    anchor_valid: bool


_EMPTY = _Snapshot([], [], [0], [0], -1, False)


def _calls_of(message: BaseMessage) -> Any:
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        return (message.tool_calls, message.invalid_tool_calls)
    return None


def _usage_total(message: BaseMessage) -> int | None:
    """Return `input_tokens + output_tokens` of an AIMessage's `usage_metadata`, else None."""
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return None
    usage = message.usage_metadata
    input_tokens = usage.get("input_tokens")
    if not isinstance(input_tokens, int) or input_tokens <= 0:
        return None
    output = usage.get("output_tokens")
    return input_tokens + (output if isinstance(output, int) and output > 0 else 0)


def _as_message(item: Any) -> BaseMessage:
    if isinstance(item, BaseMessage):
        return item
    return convert_to_messages([item])[0]


def _key(message: BaseMessage) -> Any:
    """Cache key: the message id, or its role and a fingerprint of its content without one."""
    if message.id is not None:
        return message.id
    content = message.content
    text = content if isinstance(content, str) else to_json(content)
    return (message.type, message.name, getattr(message, "tool_call_id", None), _TextPrint(text))


def _conversation(messages: list[Any]) -> Any:
    """Key of a conversation's snapshot: identities of its first two messages."""
    return tuple(
        m.id if isinstance(m, BaseMessage) and m.id is not None else id(m) for m in messages[:2]
    )


def _first_false(flags: list[bool]) -> int:
    try:
        return flags.index(False)
    except ValueError:
        return len(flags)


class TokenCounter:
    """Counts tokens of texts, messages, histories, requests and tool schemas.

    Per-message counts are cached by message id (or by role and content when the id is None)
    and revalidated on every hit against the content and the tool calls, so a message whose
    content changed under the same id is recounted. Histories are counted incrementally: the
    counter remembers the last history it saw per conversation (keyed by its first message) and
    only counts what follows the unchanged prefix, found with a C-speed identity comparison.
    Messages are treated as values: replace a message (or its content) rather than mutating
    its tool calls in place. Counters are safe to share between threads.

    Attributes:
        name: `"estimate"`, `"o200k_base"` or `"cl100k_base"`.
    """

    def __init__(self, name: str, count_text: Callable[[str], int]) -> None:
        """Create a counter called `name` that tokenizes plain text with `count_text`."""
        self.name = name
        self._count_text = count_text
        self._lock = threading.Lock()
        self._cache: dict[Any, _Entry] = {}
        self._snapshots: dict[Any, _Snapshot] = {}
        self._anchors: dict[Any, tuple[int, int]] = {}
        self._tool_schemas: dict[int, tuple[Any, str]] = {}
        self._tool_tokens: dict[tuple[str | None, str], int] = {}

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r})"

    # -- texts and single messages -------------------------------------------------------------

    def count_text(self, text: str) -> int:
        """Count the tokens of a plain text (no message framing)."""
        return self._count_text(text) if text else 0

    def count_message(self, message: BaseMessage) -> int:
        """Count one message: content, role, name, tool calls, tool call id and framing.

        Counts are cached; a cached count is used only while the content and the tool calls
        equal what was counted.
        """
        message = _as_message(message)
        key = _key(message)
        entry = self._cache.get(key)
        if entry is not None and entry.matches(message):
            return entry.tokens
        return self._store(key, message)

    def _store(self, key: Any, message: BaseMessage) -> int:
        tokens = message_tokens(message, self._count_text)
        entry = _Entry(message, tokens)
        with self._lock:
            cache = self._cache
            cache[key] = entry
            if len(cache) > CACHE_LIMIT:
                for old in list(islice(cache, CACHE_LIMIT // 10)):
                    del cache[old]
        return tokens

    # -- histories ------------------------------------------------------------------------------

    def count_messages(self, messages: Sequence[BaseMessage], *, anchor: bool = True) -> int:
        """Count a history: the sum of per-message counts, or the usage-anchored figure.

        With `anchor=True`, when the last AIMessage carrying `usage_metadata.input_tokens` is at
        index k and the messages before it are still those present when this counter first saw
        it, the result is `input_tokens + output_tokens + Σ count_message(m) for m in
        messages[k+1:]`: the provider's exact count at that point plus an estimate of what was
        added since. It already includes whatever that request carried besides messages (system
        prompt, tool schemas). If messages before the anchor were removed since (compaction),
        the anchor is stale and the plain sum is returned. A fresh counter cannot know what the
        provider saw before it started: the prefix it first observes is trusted.

        Args:
            messages: The history, oldest first.
            anchor: Use provider-reported usage when it is trustworthy.

        Returns:
            The token count.
        """
        snap = self._snapshot(messages)
        if anchor:
            anchored = self._anchored(snap)
            if anchored is not None:
                return anchored
        return snap.cumulative[-1]

    def count_request(
        self, messages: Sequence[BaseMessage], *, static_tokens: int = 0
    ) -> RequestCount:
        """Count a whole model request: its messages plus what is sent besides them.

        Args:
            messages: The request's messages.
            static_tokens: Tokens of the system prompt, tool schemas and rendered context that
                are not in `messages`. Not added to an anchored total, because the provider's
                `input_tokens` already covered them.

        Returns:
            A `RequestCount`.
        """
        snap = self._snapshot(messages)
        plain = snap.cumulative[-1]
        anchored = self._anchored(snap)
        if anchored is not None:
            return RequestCount(anchored, plain, static_tokens, anchored=True)
        return RequestCount(plain + static_tokens, plain, static_tokens, anchored=False)

    @staticmethod
    def _anchored(snap: _Snapshot) -> int | None:
        if snap.anchor < 0 or not snap.anchor_valid:
            return None
        usage = _usage_total(snap.messages[snap.anchor])
        if usage is None:
            return None
        return usage + snap.cumulative[-1] - snap.cumulative[snap.anchor + 1]

    def _snapshot(self, messages: Sequence[BaseMessage]) -> _Snapshot:
        """Count `messages`, reusing the unchanged prefix of this conversation's last count."""
        msgs = messages if isinstance(messages, list) else list(messages)
        if not msgs:
            return _EMPTY
        # Keyed by the first two messages; an id-less one is kept alive by its snapshot, so its
        # `id()` cannot be reused by another object while the snapshot exists.
        conv = _conversation(msgs)
        prev = self._snapshots.get(conv)
        keep = 0
        if prev is not None:
            # Identity only: equal-but-distinct copies would make `==` call pydantic per item.
            keep = _first_false(list(map(is_, prev.messages, msgs)))
            if keep:
                # Content reassigned in place on a recent message object: recount from there.
                # Older messages are trusted by identity (reading `.content` of every message
                # would cost more than the rest of the call).
                start = max(0, keep - _RECHECK_TAIL)
                recent = map(_get_content, msgs[start:keep])
                keep = start + _first_false(list(map(is_, prev.contents[start:keep], recent)))
            if keep == len(prev.messages) == len(msgs):
                return prev
        new = [m if isinstance(m, BaseMessage) else _as_message(m) for m in msgs[keep:]]
        if keep and prev is not None:
            cumulative = prev.cumulative[: keep + 1]
            prefix_ids = prev.prefix_ids[: keep + 1]
            all_msgs = prev.messages[:keep] + new
            contents = prev.contents[:keep]
        else:
            cumulative, prefix_ids, all_msgs, contents = [0], [0], new, []
        self._extend(new, cumulative, prefix_ids)
        contents.extend(map(_get_content, new))
        found = self._last_anchor(new)
        if found >= 0:
            anchor = keep + found
            valid = self._anchor_valid(all_msgs[anchor], anchor, prefix_ids[anchor])
        elif prev is not None and 0 <= prev.anchor < keep:
            anchor, valid = prev.anchor, prev.anchor_valid
        elif prev is not None and prev.anchor >= keep > 0:
            # The last anchor was cut off: an earlier one may still be usable.
            anchor = self._last_anchor(all_msgs[:keep])
            valid = anchor >= 0 and self._anchor_valid(all_msgs[anchor], anchor, prefix_ids[anchor])
        else:
            anchor, valid = -1, False
        snap = _Snapshot(all_msgs, contents, cumulative, prefix_ids, anchor, valid)
        with self._lock:
            snapshots = self._snapshots
            snapshots.pop(conv, None)
            snapshots[conv] = snap
            if len(snapshots) > _SNAPSHOT_LIMIT:
                del snapshots[next(iter(snapshots))]
        return snap

    def _extend(
        self, messages: list[BaseMessage], cumulative: list[int], prefix_ids: list[int]
    ) -> None:
        """Append running totals and prefix hashes of `messages`, using the per-message cache."""
        get = self._cache.get
        add_total = cumulative.append
        add_ids = prefix_ids.append
        running = cumulative[-1]
        rolling = prefix_ids[-1]
        for message in messages:
            key = message.id
            if key is None:
                key = _key(message)
            entry = get(key)
            # `_Entry.matches`, inlined: this loop runs once per message on a full recount.
            if (
                entry is not None
                and entry.kind is type(message)
                and ((content := message.content) is entry.content or content == entry.content)
                and (not entry.is_ai or entry.same_calls(message))
            ):
                running += entry.tokens
            else:
                running += self._store(key, message)
            add_total(running)
            rolling = hash((rolling, key))
            add_ids(rolling)

    @staticmethod
    def _last_anchor(messages: list[BaseMessage]) -> int:
        for index in range(len(messages) - 1, -1, -1):
            if _usage_total(messages[index]) is not None:
                return index
        return -1

    def _anchor_valid(self, message: BaseMessage, index: int, prefix_hash: int) -> bool:
        """Check that the messages before the anchor are those present when it was first met.

        The signature is the number of messages before the anchor and a hash of their ids.
        """
        signature = (index, prefix_hash)
        key = _key(message)
        seen = self._anchors.get(key)
        if seen is None:
            with self._lock:
                anchors = self._anchors
                anchors[key] = signature
                if len(anchors) > _ANCHOR_LIMIT:
                    del anchors[next(iter(anchors))]
            return True
        if seen != signature:
            logger.debug("usage anchor %r is stale: messages before it changed", key)
            return False
        return True

    # -- read-only measurements ---------------------------------------------------------------

    def fork(self) -> TokenCounter:
        """A private copy that knows what this counter learned and writes only to itself.

        For measurements that must leave no trace (the gateway's `GET /context`): counting with
        the copy registers no usage anchor, evicts no cache entry and replaces no conversation
        snapshot of this counter, so what later callers count is the same whether or not the
        copy was used. Costs one copy of the caches' dicts (not of their entries).
        """
        twin = TokenCounter(self.name, self._count_text)
        with self._lock:
            twin._cache = dict(self._cache)
            twin._snapshots = dict(self._snapshots)
            twin._anchors = dict(self._anchors)
            twin._tool_schemas = dict(self._tool_schemas)
            twin._tool_tokens = dict(self._tool_tokens)
        return twin

    # -- tools ----------------------------------------------------------------------------------

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Count the tokens of tool schemas as sent to an OpenAI-style API.

        Each tool (a `BaseTool`, a function, a pydantic model or an OpenAI tool dict) is
        converted with `convert_to_openai_tool` and serialized as UTF-8 JSON. Counts are cached
        by the tool's name and a hash of its schema; conversions of non-dict tools are cached
        by identity.
        """
        return sum(self._count_tool(tool) for tool in tools)

    def _count_tool(self, tool: Any) -> int:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        cached = None if isinstance(tool, dict) else self._tool_schemas.get(id(tool))
        if cached is not None and cached[0] is tool:
            schema = cached[1]
        else:
            schema = to_json(convert_to_openai_tool(tool))
            if not isinstance(tool, dict):
                with self._lock:
                    if len(self._tool_schemas) >= _TOOL_LIMIT:
                        self._tool_schemas.clear()
                    self._tool_schemas[id(tool)] = (tool, schema)
        key = (getattr(tool, "name", None), hashlib.blake2b(schema.encode()).hexdigest())
        tokens = self._tool_tokens.get(key)
        if tokens is None:
            tokens = TOOL_SCHEMA_OVERHEAD + self._count_text(schema)
            with self._lock:
                if len(self._tool_tokens) >= _TOOL_LIMIT:
                    self._tool_tokens.clear()
                self._tool_tokens[key] = tokens
        return tokens
