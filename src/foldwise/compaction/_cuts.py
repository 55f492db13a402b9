"""Where the planner may cut: keep and budget targets, pair-safe cuts, the protected end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from foldwise.messages import ToolPairing, is_real_user_message

if TYPE_CHECKING:
    from foldwise.tokens import TokenCounter

__all__ = [
    "Counts",
    "LazyCounts",
    "NewestExchange",
    "cut_upper_bound",
    "latest_user_index",
    "newest_exchange",
    "safe_cut",
    "tail_start_for_tokens",
]


@dataclass(frozen=True)
class NewestExchange:
    """The last AIMessage with tool calls when nothing but tool results follows it.

    Attributes:
        start: Index of the AIMessage; no cut may fall after it.
        results: Indices of the tool results answering its calls, in order.
    """

    start: int
    results: tuple[int, ...]


class Counts(Protocol):
    """Per-message token counts by index (a list, or `LazyCounts`)."""

    def __len__(self) -> int:
        """Number of messages."""
        ...

    def __getitem__(self, index: int) -> int:
        """Tokens of message `index`."""
        ...


class LazyCounts:
    """Per-message token counts, counted on first use: a plan mostly reads only its tail."""

    def __init__(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> None:
        """Count `messages` with `counter`, one message at a time, when asked."""
        self._messages = messages
        self._counter = counter
        self._known: dict[int, int] = {}

    def __len__(self) -> int:
        """Number of messages."""
        return len(self._messages)

    def __getitem__(self, index: int) -> int:
        """Tokens of message `index` (cached)."""
        tokens = self._known.get(index)
        if tokens is None:
            tokens = self._known[index] = self._counter.count_message(self._messages[index])
        return tokens


def tail_start_for_tokens(counts: Counts, budget: int) -> int:
    """Smallest index whose suffix fits in `budget` tokens (len when nothing fits)."""
    running = 0
    for index in range(len(counts) - 1, -1, -1):
        running += counts[index]
        if running > budget:
            return index + 1
    return 0


def safe_cut(forbidden: Sequence[bool], desired: int, *, upper: int, prefer_forward: bool) -> int:
    """Nearest cut to `desired` in `1..upper` that splits no call/result pair (0 if none)."""
    desired = max(1, min(desired, upper))
    backward = next((c for c in range(desired, 0, -1) if not forbidden[c]), 0)
    forward = next((c for c in range(desired, upper + 1) if not forbidden[c]), 0)
    if prefer_forward:
        return forward or backward
    return backward or forward


def newest_exchange(messages: Sequence[BaseMessage]) -> NewestExchange | None:
    """Find the newest tool exchange at the end of `messages` (costs its own length only)."""
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], ToolMessage):
        start -= 1
    call = messages[start - 1] if start > 0 else None
    if not isinstance(call, AIMessage) or not call.tool_calls:
        return None
    own = {str(c.get("id")) for c in call.tool_calls}
    results = tuple(
        index
        for index in range(start, len(messages))
        if getattr(messages[index], "tool_call_id", None) in own
    )
    return NewestExchange(start - 1, results)


def cut_upper_bound(
    messages: Sequence[BaseMessage], pairing: ToolPairing, exchange: NewestExchange | None
) -> int:
    """Highest allowed cut: the newest exchange and a pending last call stay verbatim."""
    upper = len(messages)
    last_ai = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None
    )
    if last_ai is not None and any(ai == last_ai for ai, _ in pairing.pending_calls):
        upper = last_ai  # calls still pending at the end stay with their AIMessage
    if exchange is not None:
        upper = min(upper, exchange.start)
    return upper


def latest_user_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the current request (the latest real user message), scanning from the end."""
    return next(
        (i for i in range(len(messages) - 1, -1, -1) if is_real_user_message(messages[i])), None
    )
