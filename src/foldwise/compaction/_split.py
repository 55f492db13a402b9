"""Splitting at the cut: what is summarized, rescued, kept, offloaded or clipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from foldwise.compaction._cuts import Counts, NewestExchange
from foldwise.compaction._policy import CompactionPolicy
from foldwise.messages import ToolPairing, is_dynamic_reminder, is_real_user_message, message_text

__all__ = [
    "OFFLOAD_WORTH_TOKENS",
    "Split",
    "demote_for_budget",
    "human_overflow",
    "oversized_results",
    "split_at",
]

OFFLOAD_WORTH_TOKENS = 1_500
"""A user message must be larger than this to be worth storing behind a preview: the preview
(4,000 characters by default) plus its notice is about this size. Smaller ones that no longer
fit are summarized instead; the compaction archive keeps them verbatim and searchable."""
_PREVIEW_CHARS = 4_000 + 500
"""The default preview (`offload.preview_chars`) plus the notice above it, in characters."""


def _stored_tokens(message: BaseMessage, tokens: int) -> int:
    """Tokens of `message` once stored behind a preview (a message larger is worth storing).

    `OFFLOAD_WORTH_TOKENS`, or more for text denser than about three characters a token (CJK,
    indented JSON, rare words): its 4,000-character preview costs what those characters do.
    """
    chars = len(message_text(message))
    return max(OFFLOAD_WORTH_TOKENS, tokens * _PREVIEW_CHARS // chars) if chars else tokens


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


def demote_for_budget(
    messages: Sequence[BaseMessage],
    split: Split,
    counts: Counts,
    latest_user: int | None,
    *,
    excess: int,
) -> Split:
    """Summarize the oldest rescued user messages while the kept part exceeds the budget.

    Only messages too small to be worth a preview move (larger ones are stored verbatim by
    `human_overflow`); the current request and reminders never do. Without this a thread of
    many medium-sized user messages would keep them all and every request would be refused.
    """
    if excess <= 0:
        return split
    rescued, demoted = list(split.rescued), []
    for index in split.rescued:
        if excess <= 0:
            break
        if index == latest_user or not is_real_user_message(messages[index]):
            continue
        size = counts[index]
        stored = _stored_tokens(messages[index], size)
        if size > stored:
            excess -= size - stored  # stored behind a preview instead
            continue
        rescued.remove(index)
        demoted.append(index)
        excess -= size
    if not demoted:
        return split
    summarized = tuple(sorted((*split.summarized, *demoted)))
    return Split(tuple(rescued), summarized, split.tail)


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
        stored = _stored_tokens(messages[index], counts[index])
        if human_tokens <= policy.preserve_human_max_tokens and counts[index] <= stored:
            continue  # budget pressure only: too small to be worth a preview
        excess -= max(0, counts[index] - stored)
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
