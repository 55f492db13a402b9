"""Splitting at the cut: what is summarized, rescued, kept, offloaded or clipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from foldwise.compaction._cuts import Counts, NewestExchange
from foldwise.compaction._policy import CompactionPolicy
from foldwise.messages import ToolPairing, is_dynamic_reminder, is_real_user_message

__all__ = ["Split", "human_overflow", "oversized_results", "split_at"]


@dataclass(frozen=True)
class Split:
    """Message indices on each side of a cut.

    Attributes:
        rescued: Messages before the cut kept verbatim (reminders, user messages), in order.
        summarized: Messages removed into the summary (orphan results included), sorted.
        tail: Messages from the cut on that are kept, in order.
    """

    rescued: tuple[int, ...]
    summarized: tuple[int, ...]
    tail: tuple[int, ...]

    @property
    def kept(self) -> tuple[int, ...]:
        """Indices of the new message list, in order: rescued, then the tail."""
        return self.rescued + self.tail


def split_at(
    messages: Sequence[BaseMessage],
    cut: int,
    pairing: ToolPairing,
    policy: CompactionPolicy,
    latest_user: int | None,
) -> Split:
    """Rescue reminders and user messages from `messages[:cut]`; orphans are never kept.

    The current request (`latest_user`) is rescued whatever `preserve_human` says.
    """
    keep_all_users = policy.preserve_human == "all"
    rescued: list[int] = []
    summarized: list[int] = []
    for index in range(cut):
        message = messages[index]
        # The type test first: it rules out most messages (AI and tool) cheaply.
        verbatim = isinstance(message, HumanMessage | SystemMessage) and (
            index == latest_user
            or is_dynamic_reminder(message)
            or (keep_all_users and is_real_user_message(message))
        )
        (rescued if verbatim else summarized).append(index)
    orphans = set(pairing.orphan_results)
    tail = [i for i in range(cut, len(messages)) if i not in orphans]
    summarized.extend(i for i in range(cut, len(messages)) if i in orphans)
    return Split(tuple(rescued), tuple(summarized), tuple(tail))


def human_overflow(
    messages: Sequence[BaseMessage],
    split: Split,
    counts: Counts,
    policy: CompactionPolicy,
    latest_user: int | None,
    *,
    excess: int = 0,
) -> tuple[str, ...]:
    """Ids of the oldest rescued user messages to store verbatim instead of keeping in view.

    Those beyond `preserve_human.max_tokens`, and more while the kept part still exceeds the
    request budget by `excess` tokens (older user input is stored and previewed rather than
    sent whole into a request the provider would refuse). The current request never is.
    """
    if policy.preserve_human != "all":
        return ()
    human = [i for i in split.rescued if i != latest_user and is_real_user_message(messages[i])]
    human_tokens = sum(counts[i] for i in human)
    overflow: list[str] = []
    for index in human:
        if human_tokens <= policy.preserve_human_max_tokens and excess <= 0:
            break
        excess -= counts[index]
        overflow.append(str(messages[index].id))
        human_tokens -= counts[index]
    return tuple(overflow)


def oversized_results(
    messages: Sequence[BaseMessage],
    exchange: NewestExchange | None,
    counts: Counts,
    *,
    fits: bool,
) -> tuple[str, ...]:
    """Ids of the newest exchange's results, largest first, when the request does not fit."""
    if fits or exchange is None:
        return ()
    ordered = sorted(exchange.results, key=lambda i: -counts[i])  # stable: ties keep order
    return tuple(str(messages[i].id) for i in ordered)
