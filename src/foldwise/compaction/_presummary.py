"""Background pre-summarization: the next compaction's summary, made before the compaction fires.

Once a request passes `presummarize_at` of a trigger, the span the next compaction would remove
is summarized in an asyncio task. When the compaction fires, the planner is asked to prefer that
task's cut; the summary is committed only when the plan it yields has the same fingerprint
(`span_fingerprint`): the same summarized messages (ids, order and what the summarizer reads of
them), the same removed and rescued ids, the same prior summary, the same candidates and prompt
settings. Anything else is a miss and the compaction runs as it always did. The cache is
process-local, keyed by thread id and bounded; after a restart, or on another worker, it misses.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from foldwise._steps import Steps, run_async
from foldwise.compaction._planner import CompactionDecision, CompactionPlan, SkipReason
from foldwise.compaction._policy import CompactionPolicy
from foldwise.compaction._prompt_transcript import render_transcript
from foldwise.compaction._summarize import SummaryResult

__all__ = [
    "MAX_PRESUMMARY_THREADS",
    "Presummaries",
    "PresummaryEntry",
    "post_compaction_limit",
    "presummary_due",
    "span_fingerprint",
]

logger = logging.getLogger(__name__)

MAX_PRESUMMARY_THREADS = 256
"""Threads whose background summary is kept at once; the least recently started go first."""


def presummary_due(
    decision: CompactionDecision, message_count: int, policy: CompactionPolicy
) -> bool:
    """Whether a request that fired no trigger has passed `presummarize_at` of one.

    Token and fraction clauses compare the whole request, message clauses the message count
    (the summary counts as one, as for the trigger); the budget invariant counts as a clause.
    """
    share = policy.presummarize_at
    if share is None or decision.skip_reason is not SkipReason.BELOW_THRESHOLD:
        return False
    for clause in policy.triggers:
        metric = message_count if clause.kind == "messages" else decision.tokens_before
        if metric >= share * clause.limit:
            return True
    budget = policy.budget_limit
    return budget is not None and decision.tokens_before >= share * budget


def post_compaction_limit(policy: CompactionPolicy) -> int | None:
    """Tokens a compaction on a background summary's (earlier) cut must end below.

    A preferred cut keeps more than `keep` asks; it is taken only while the compacted request
    stays under the share of the lowest token trigger (so the next compaction is not near), or
    under the budget's share when no token clause is configured.
    """
    share = policy.presummarize_at
    if share is None:
        return None
    limits = [t.limit for t in policy.triggers if t.kind != "messages"]
    if policy.budget_limit is not None:
        limits.append(policy.budget_limit)
    return int(share * min(limits)) if limits else None


def _message_digest(message: BaseMessage) -> str:
    """What the summarizer reads of a message, as stable text (survives a checkpoint trip).

    Its rendered transcript block is part of it: that is exactly what the prompt shows (a
    message hidden from the UI renders nothing, invalid tool calls render as call lines), so a
    change the summarizer would see never keeps the fingerprint.
    """
    calls = [
        (c.get("name"), c.get("args"), c.get("id")) for c in getattr(message, "tool_calls", [])
    ]
    parts = [
        message.type,
        str(message.id),
        message.name or "",
        str(getattr(message, "tool_call_id", "") or ""),
        json.dumps(message.content, sort_keys=True, default=str),
        json.dumps(calls, sort_keys=True, default=str),
        render_transcript([message]),
    ]
    return "\x1f".join(parts)


def span_fingerprint(
    plan: CompactionPlan,
    summary_text: str | None,
    names: Sequence[str],
    policy: CompactionPolicy,
) -> str:
    """A digest of everything that makes a summary right for a plan.

    The summarizer input (every message's id, role, content and rendered transcript block, in
    order), which ids are removed and which rescued, the prior summary, the candidate models in
    order and the prompt settings (template, trimming, size target).
    """
    digest = hashlib.blake2b(digest_size=20)

    def feed(value: str) -> None:
        digest.update(value.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e")

    feed("none" if summary_text is None else "text:" + summary_text)
    for message in plan.summary_input:
        feed(_message_digest(message))
    feed("removed:" + ",".join(str(m.id) for m in plan.to_summarize))
    feed("rescued:" + ",".join(plan.rescued_ids))
    feed("names:" + ",".join(names))
    settings = (policy.summary_prompt, policy.trim_tokens_to_summarize, policy.summary_max_tokens)
    feed(json.dumps(settings))
    return digest.hexdigest()


@dataclass
class PresummaryEntry:
    """One thread's background summary and the span it was made of."""

    fingerprint: str
    cut: int
    first_id: str
    last_id: str
    summary_text: str | None
    task: asyncio.Task[SummaryResult | None]

    def still_prefix(self, messages: Sequence[BaseMessage], summary_text: str | None) -> bool:
        """A cheap check that the span may still be current (the fingerprint decides)."""
        return (
            summary_text == self.summary_text
            and len(messages) >= self.cut
            and str(messages[0].id) == self.first_id
            and str(messages[self.cut - 1].id) == self.last_id
        )

    def usable(self) -> bool:
        """Whether its task can still deliver here: not cancelled, and of the running loop.

        A caller that runs each turn in its own `asyncio.run` loses the task with its loop; the
        next turn then starts a new one instead of keeping a dead entry.
        """
        task = self.task
        return not task.cancelled() and task.get_loop() is asyncio.get_running_loop()

    def cancel(self) -> None:
        """Cancel the task if it still runs (its loop may be gone: then there is nothing to do)."""
        if self.task.done():
            return
        try:
            self.task.cancel()
        except RuntimeError:  # its event loop is closed: the task can never run again
            logger.debug("background summary of a closed event loop dropped")


async def _background(steps: Steps[SummaryResult], thread_id: str) -> SummaryResult | None:
    """Run the summary steps; a failure is logged and becomes `None` (the sync path runs)."""
    try:
        return await run_async(steps)
    except Exception as err:  # discarded: the compaction summarizes synchronously as before
        logger.warning("background summary failed (thread %s): %s", thread_id, err)
        return None


class Presummaries:
    """Background summaries by thread id: bounded, process-local, async runs only.

    Every task is cancelled when its entry is evicted, replaced or found stale, and `aclose`
    cancels and awaits whatever still runs (the gateway calls it on shutdown).

    Args:
        maxsize: Threads kept at once (`MAX_PRESUMMARY_THREADS`).
    """

    def __init__(self, maxsize: int = MAX_PRESUMMARY_THREADS) -> None:
        if maxsize <= 0:
            raise ValueError("maxsize must be positive")
        self.maxsize = maxsize
        self._entries: OrderedDict[str, PresummaryEntry] = OrderedDict()
        self._tasks: set[asyncio.Task[SummaryResult | None]] = set()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def running(self) -> int:
        """Background summaries still in flight (every entry's, evicted ones included)."""
        return sum(1 for task in self._tasks if not task.done())

    def get(self, thread_id: str) -> PresummaryEntry | None:
        """The thread's entry, if any."""
        return self._entries.get(thread_id)

    def discard(self, thread_id: str) -> None:
        """Forget the thread's entry and cancel its task."""
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            entry.cancel()

    def pop(self, thread_id: str) -> PresummaryEntry | None:
        """Remove and return the thread's entry (its task keeps running)."""
        return self._entries.pop(thread_id, None)

    def start(
        self,
        thread_id: str,
        *,
        fingerprint: str,
        cut: int,
        messages: Sequence[BaseMessage],
        summary_text: str | None,
        steps: Steps[SummaryResult],
    ) -> PresummaryEntry:
        """Run `steps` in a task for the span `messages[:cut]`; must be called on the loop.

        The task runs in a fresh context, detached from the run that started it: it may outlive
        that run, and no stream or callback of it may see the summarizer's tokens (its calls
        are tagged `nostream` / `foldwise:summarize` as well).
        """
        self.discard(thread_id)
        task = asyncio.get_running_loop().create_task(
            _background(steps, thread_id),
            name=f"foldwise-presummary-{thread_id}",
            context=contextvars.Context(),
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        entry = PresummaryEntry(
            fingerprint, cut, str(messages[0].id), str(messages[cut - 1].id), summary_text, task
        )
        self._entries[thread_id] = entry
        while len(self._entries) > self.maxsize:
            _, oldest = self._entries.popitem(last=False)
            oldest.cancel()
        return entry

    @staticmethod
    async def aresult(entry: PresummaryEntry) -> SummaryResult | None:
        """The entry's summary, awaiting the task if it is still running (same work).

        `None` when it failed, was cancelled, or belongs to another event loop. Cancelling the
        caller cancels the task too: nothing is left behind.
        """
        task = entry.task
        if task.get_loop() is not asyncio.get_running_loop():
            entry.cancel()
            return None
        try:
            return await task
        except asyncio.CancelledError:
            if task.cancelled() and not _current_cancelling():
                return None  # the task was cancelled, not the caller
            raise

    async def aclose(self) -> None:
        """Cancel every background summary of this loop and wait for them to end."""
        self._entries.clear()
        loop = asyncio.get_running_loop()
        tasks = [t for t in self._tasks if t.get_loop() is loop and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _current_cancelling() -> bool:
    """Whether the running task itself is being cancelled."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0
