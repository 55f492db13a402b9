"""`TokenCounter`: cached per-message counts, an incremental history total, usage anchoring."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages

from foldwise.tokens._anchor import (
    EMPTY_PREFIX,
    USAGE_STAMP_KEY,
    Stamp,
    prefix_step,
    read_stamp,
    usage_total,
)
from foldwise.tokens._cache import MessageCache, cache_key, same_value
from foldwise.tokens._message import message_tokens, to_json

__all__ = ["RequestCount", "TokenCounter"]

logger = logging.getLogger(__name__)

TOOL_SCHEMA_OVERHEAD = 8
"""Framing tokens added per tool schema (the provider wraps each definition)."""
_SNAPSHOT_LIMIT = 64
_TOOL_LIMIT = 4_096
_SAMPLES = 32
_RECHECK_TAIL = 256

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
    """Whether `total` is provider-reported usage plus an estimate of what changed since."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The last history counted for one conversation, so an append costs O(new messages).

    The lists are append-only and may be shared with a newer snapshot of the same
    conversation that extended them in place; each snapshot reads only its first `n` entries.
    """

    messages: list[BaseMessage]
    contents: list[Any]  # each message's content object when it was counted
    cumulative: list[int]  # cumulative[i] = sum of the counts of messages[:i]
    prefixes: list[bytes]  # prefixes[i] = usage-stamp signature of messages[:i]
    anchor: int  # index of the last verified usage anchor, -1 if none
    n: int  # how many messages this snapshot covers


_EMPTY = _Snapshot([], [], [0], [EMPTY_PREFIX], -1, 0)


def _as_message(item: Any) -> BaseMessage:
    if isinstance(item, BaseMessage):
        return item
    return convert_to_messages([item])[0]


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


def _verified(message: BaseMessage, index: int, prefixes: list[bytes]) -> Stamp | None:
    """Return the stamp of `message` at `index` if its usage measured exactly `prefixes[index]`.

    Usage without a stamp (old checkpoints, foreign messages) is never trusted: a counter that
    first meets it cannot know what the provider saw.
    """
    if usage_total(message) is None:
        return None
    stamp = read_stamp(message)
    if stamp is None or stamp.n != index or stamp.prefix != prefixes[index].hex():
        return None
    return stamp


def _last_anchor(messages: list[BaseMessage], start: int, stop: int, prefixes: list[bytes]) -> int:
    """Index of the last verified anchor in `messages[start:stop]`, -1 if none."""
    for index in range(stop - 1, start - 1, -1):
        message = messages[index]
        # Cheap pre-check before reading usage and the stamp.
        if (
            isinstance(message, AIMessage)
            and USAGE_STAMP_KEY in message.response_metadata
            and _verified(message, index, prefixes) is not None
        ):
            return index
    return -1


def _equal_prefix(prev: _Snapshot, msgs: list[Any], start: int) -> int:
    """How many leading messages equal what `prev` counted, checking from `start` on.

    For a history decoded anew (a new run reads its checkpoint): other objects, same values.
    A message equals the one counted at its position when both have the same type and id
    (not None), its content equals the content counted, and its name, tool calls and tool call
    id equal the counted message's: everything its count and its signature are made of.
    Values are compared down to their types (`same_value`): `1 == 1.0 == True`, but their
    JSON, which is what is counted, differs.
    """
    limit = min(prev.n, len(msgs))
    index = start
    while index < limit:
        old, new = prev.messages[index], msgs[index]
        if type(new) is not type(old) or old.id is None or new.id != old.id or new.name != old.name:
            break
        content, counted = new.content, prev.contents[index]
        if type(content) is str and type(counted) is str:  # the usual case, inlined
            if content != counted:
                break
        elif not same_value(content, counted):
            break
        if isinstance(new, AIMessage):
            calls = new.tool_calls, new.invalid_tool_calls
            counted = old.tool_calls, old.invalid_tool_calls  # type: ignore[attr-defined]
            if (any(calls) or any(counted)) and not same_value(calls, counted):
                break
        elif isinstance(new, ToolMessage) and new.tool_call_id != old.tool_call_id:  # type: ignore[attr-defined]
            break
        index += 1
    return index


class TokenCounter:
    """Counts tokens of texts, messages, histories, requests and tool schemas.

    Per-message counts are cached by message id (or by role and content when the id is None)
    and revalidated on every hit against a fingerprint of the content, the name, the tool call
    id and the tool calls, so a message changed under the same id is recounted; the cache never
    keeps the content itself. Histories are counted incrementally: the counter remembers the
    last history it saw per conversation (keyed by its first message) and only counts what
    follows the unchanged prefix, found with a C-speed identity comparison or, for the same
    history decoded anew (a new run reads its checkpoint), by comparing what each count is
    made of. Messages are treated as values: replace a message (or its content) rather than
    mutating it in place. Counters are safe to share between threads.

    Attributes:
        name: `"estimate"`, `"o200k_base"` or `"cl100k_base"`.
    """

    def __init__(self, name: str, count_text: Callable[[str], int]) -> None:
        """Create a counter called `name` that tokenizes plain text with `count_text`."""
        self.name = name
        self._count_text = count_text
        self._lock = threading.Lock()
        self._cache = MessageCache()
        self._snapshots: dict[Any, _Snapshot] = {}
        self._extend_in_place = True  # False in a fork: its snapshots' lists are shared
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
        return self._message_tokens(cache_key(message), message)

    def _message_tokens(self, key: Any, message: BaseMessage) -> int:
        entry = self._cache.get(key)
        if entry is not None and entry.matches(message):
            return entry.tokens
        tokens = message_tokens(message, self._count_text)
        self._cache.put(key, message, tokens)
        return tokens

    # -- histories ------------------------------------------------------------------------------

    def count_messages(self, messages: Sequence[BaseMessage], *, anchor: bool = True) -> int:
        """Count a history: the sum of per-message counts, or the usage-anchored figure.

        With `anchor=True`, when the last verified anchor is the AIMessage at index k, the
        result is `input_tokens + output_tokens + Σ count_message(m) for m in messages[k+1:]`:
        the provider's exact count at that point plus an estimate of what was added since. It
        already includes whatever that request carried besides messages (system prompt, tool
        schemas). An anchor is verified when the message carries a stamp from `stamp_usage`
        and `messages[:k]` are the very messages that request had (same ids, same counts, same
        order); usage without a stamp, or after the messages before it changed (compaction),
        is ignored and the plain sum is returned.

        Args:
            messages: The history, oldest first.
            anchor: Use provider-reported usage when it is verified.

        Returns:
            The token count.
        """
        snap = self._snapshot(messages)
        if anchor:
            anchored = self._anchored(snap, None)
            if anchored is not None:
                return anchored
        return snap.cumulative[snap.n]

    def count_request(
        self, messages: Sequence[BaseMessage], *, static_tokens: int = 0
    ) -> RequestCount:
        """Count a whole model request: its messages plus what is sent besides them.

        Args:
            messages: The request's messages.
            static_tokens: Tokens of the system prompt, tool schemas and rendered context that
                are not in `messages`. An anchored total replaces the stamped static size
                (already in the provider's `input_tokens`) by this one.

        Returns:
            A `RequestCount`.
        """
        snap = self._snapshot(messages)
        plain = snap.cumulative[snap.n]
        anchored = self._anchored(snap, static_tokens)
        if anchored is not None:
            return RequestCount(anchored, plain, static_tokens, anchored=True)
        return RequestCount(plain + static_tokens, plain, static_tokens, anchored=False)

    def stamp_usage(
        self,
        response: AIMessage,
        request_messages: Sequence[BaseMessage],
        *,
        static_tokens: int,
    ) -> AIMessage:
        """Record on a model response what its `usage_metadata` measured.

        Call it with the response of the run model and the messages of the request that
        produced it, as they will appear before the response in later counts (the state's
        messages, without rendered context). A later `count_messages`/`count_request` uses the
        response's usage as an anchor only while the messages before it are exactly these.

        Args:
            response: The model's answer.
            request_messages: The request's messages, oldest first.
            static_tokens: Tokens the request carried besides `request_messages` (system
                prompt, tool schemas, rendered durable context), as later passed to
                `count_request`.

        Returns:
            A copy of `response` (same id) whose `response_metadata[USAGE_STAMP_KEY]` holds
            `{"prefix", "n", "static"}`; `response` itself when it reports no input tokens.
        """
        if usage_total(response) is None:
            return response
        snap = self._snapshot(request_messages)
        stamp = Stamp(snap.prefixes[snap.n].hex(), snap.n, static_tokens)
        metadata = {**response.response_metadata, USAGE_STAMP_KEY: stamp.to_dict()}
        return response.model_copy(update={"response_metadata": metadata})

    @staticmethod
    def _anchored(snap: _Snapshot, static_tokens: int | None) -> int | None:
        if snap.anchor < 0:
            return None
        message = snap.messages[snap.anchor]
        usage = usage_total(message)
        stamp = _verified(message, snap.anchor, snap.prefixes)
        if usage is None or stamp is None:  # pragma: no cover - checked when it was found
            return None
        total = usage + snap.cumulative[snap.n] - snap.cumulative[snap.anchor + 1]
        if static_tokens is not None:
            total += static_tokens - stamp.static
        return max(total, 0)

    @staticmethod
    def _unchanged(prev: _Snapshot, msgs: list[Any]) -> int:
        """How many leading messages are the objects (and contents) `prev` counted.

        Identity is compared over the newest `_RECHECK_TAIL` positions only; when the oldest
        of those is unchanged, everything before it is taken as unchanged too (histories grow
        at the end; a compaction or a reloaded checkpoint changes that position as well). Only
        then is the whole prefix scanned.
        """
        limit = min(prev.n, len(msgs))
        start = max(0, limit - _RECHECK_TAIL)
        window = list(map(is_, prev.messages[start:limit], msgs[start:limit]))
        first = _first_false(window)
        if first == 0 and start > 0:
            keep = _first_false(list(map(is_, prev.messages[:limit], msgs[:limit])))
        else:
            keep = start + first
            # A few sampled older positions too: a message replaced deep in the history within
            # a run (a tool's `Command` editing an old message) is usually caught here.
            step = max(1, start // _SAMPLES)
            for index in range(0, start, step):
                if prev.messages[index] is not msgs[index]:
                    keep = _first_false(list(map(is_, prev.messages[:index], msgs[:index])))
                    break
        if keep:
            # Content reassigned in place on a recent message object: recount from there.
            begin = max(0, keep - _RECHECK_TAIL)
            recent = map(_get_content, msgs[begin:keep])
            keep = begin + _first_false(list(map(is_, prev.contents[begin:keep], recent)))
        return keep

    def _snapshot(self, messages: Sequence[BaseMessage]) -> _Snapshot:
        """Count `messages`, reusing the unchanged prefix of this conversation's last count."""
        msgs = messages if isinstance(messages, list) else list(messages)
        if not msgs:
            return _EMPTY
        # Keyed by the first two messages; an id-less one is kept alive by its snapshot, so its
        # `id()` cannot be reused by another object while the snapshot exists.
        conv = _conversation(msgs)
        prev = self._snapshots.get(conv)
        keep = self._unchanged(prev, msgs) if prev is not None else 0
        if prev is not None and keep == prev.n == len(msgs):
            return prev
        if prev is not None and keep < prev.n:
            reused = _equal_prefix(prev, msgs, keep)  # the same history decoded anew
            if reused > keep:
                return self._rebase(conv, prev, msgs, reused)
        new = [m if isinstance(m, BaseMessage) else _as_message(m) for m in msgs[keep:]]
        with self._lock:
            if (
                self._extend_in_place
                and prev is not None
                and keep == prev.n
                and len(prev.cumulative) == prev.n + 1
            ):
                # A pure append that nobody made before: extend the shared lists in place.
                all_msgs, contents = prev.messages, prev.contents
                cumulative, prefixes = prev.cumulative, prev.prefixes
                del all_msgs[keep:], contents[keep:]
                all_msgs.extend(new)
            elif keep and prev is not None:
                cumulative = prev.cumulative[: keep + 1]
                prefixes = prev.prefixes[: keep + 1]
                all_msgs = prev.messages[:keep] + new
                contents = prev.contents[:keep]
            else:
                cumulative, prefixes, all_msgs, contents = [0], [EMPTY_PREFIX], new, []
            self._extend(new, cumulative, prefixes)
            contents.extend(map(_get_content, new))
        anchor = _last_anchor(all_msgs, keep, keep + len(new), prefixes)
        if anchor < 0 and prev is not None and keep:
            # Whether a message is a verified anchor depends only on it and the prefix before
            # it, both unchanged below `keep`: reuse the previous answer when it is still there.
            anchor = (
                prev.anchor if prev.anchor < keep else _last_anchor(all_msgs, 0, keep, prefixes)
            )
        snap = _Snapshot(all_msgs, contents, cumulative, prefixes, anchor, keep + len(new))
        with self._lock:
            snapshots = self._snapshots
            snapshots.pop(conv, None)
            snapshots[conv] = snap
            if len(snapshots) > _SNAPSHOT_LIMIT:
                del snapshots[next(iter(snapshots))]
        return snap

    def _rebase(self, conv: Any, prev: _Snapshot, msgs: list[Any], equal: int) -> _Snapshot:
        """A snapshot of `msgs` whose first `equal` messages equal `prev`'s (other objects).

        Their counts and signatures are `prev`'s; only the messages after them are counted.
        The anchor is searched again over the whole list: it depends on usage metadata, which
        the equality does not compare (the search stops at the newest verified anchor).
        """
        new = [m if isinstance(m, BaseMessage) else _as_message(m) for m in msgs[equal:]]
        cumulative, prefixes = prev.cumulative[: equal + 1], prev.prefixes[: equal + 1]
        with self._lock:
            self._extend(new, cumulative, prefixes)
        all_msgs = [*msgs[:equal], *new]
        contents = list(map(_get_content, all_msgs))
        anchor = _last_anchor(all_msgs, 0, len(all_msgs), prefixes)
        snap = _Snapshot(all_msgs, contents, cumulative, prefixes, anchor, len(all_msgs))
        with self._lock:
            self._snapshots.pop(conv, None)
            self._snapshots[conv] = snap
        return snap

    def _extend(
        self, messages: list[BaseMessage], cumulative: list[int], prefixes: list[bytes]
    ) -> None:
        """Append running totals and prefix signatures of `messages`, using the cache."""
        count = self._message_tokens
        add_total = cumulative.append
        add_prefix = prefixes.append
        running = cumulative[-1]
        prefix = prefixes[-1]
        for message in messages:
            key = message.id
            tokens = count(cache_key(message) if key is None else key, message)
            running += tokens
            add_total(running)
            prefix = prefix_step(prefix, message, tokens)
            add_prefix(prefix)

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
            twin._cache = self._cache.copy()
            twin._snapshots = dict(self._snapshots)
            twin._extend_in_place = False
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
