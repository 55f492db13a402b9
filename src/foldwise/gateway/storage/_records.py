"""Value objects returned and accepted by `GatewayStorage`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

__all__ = [
    "EventKind",
    "ReceiptRecord",
    "RunKind",
    "RunRecord",
    "RunStatus",
    "ThreadActivity",
    "ThreadLock",
    "ThreadRecord",
    "ThreadSortKey",
    "ThreadStatus",
    "TranscriptEntry",
    "TranscriptEvent",
    "TranscriptLocation",
]

ThreadStatus = Literal["idle", "busy", "error"]
"""Status of a thread: `idle`, `busy` (a run or compaction holds it) or `error`."""

RunKind = Literal["run", "compact"]
"""What a run row records: an agent run or a manual compaction."""

RunStatus = Literal["pending", "running", "success", "error", "interrupted"]
"""Lifecycle of a run: `pending` (queued) or `running`, finished with one of the other three."""

EventKind = Literal["message", "compaction"]
"""A transcript event is a visible message or a compaction marker."""

ThreadSortKey = Literal["created_at", "updated_at"]
"""The time `search_threads` sorts by (newest first)."""

THREAD_STATUSES: frozenset[str] = frozenset(get_args(ThreadStatus))
RUN_KINDS: frozenset[str] = frozenset(get_args(RunKind))
RUN_STATUSES: frozenset[str] = frozenset(get_args(RunStatus))
FINAL_RUN_STATUSES: frozenset[str] = RUN_STATUSES - {"pending", "running"}
EVENT_KINDS: frozenset[str] = frozenset(get_args(EventKind))


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    """A gateway thread row.

    Attributes:
        thread_id: The validated thread id.
        created_at: Creation time (timezone-aware UTC).
        updated_at: Last change of metadata or status (timezone-aware UTC).
        metadata: Free-form JSON object; searched by containment.
        status: `idle`, `busy` or `error`.
        owner: The identity that created it (the gateway's auth); `""` without auth.
    """

    thread_id: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    status: ThreadStatus
    owner: str = ""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run (or manual compaction) on a thread.

    Attributes:
        run_id: The validated run id.
        thread_id: The thread it ran on.
        assistant_id: The configured agent that ran.
        kind: `run` or `compact`.
        status: `pending`, `running`, `success`, `error` or `interrupted`.
        error: The error text of a failed run.
        metadata: Free-form JSON object.
        created_at: When the run started (timezone-aware UTC).
        updated_at: Last status change (timezone-aware UTC).
    """

    run_id: str
    thread_id: str
    assistant_id: str
    kind: RunKind
    status: RunStatus
    error: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptEvent:
    """An event to append to a thread's transcript.

    Attributes:
        kind: `message` for a visible message, `compaction` for a compaction marker.
        message: A JSON object: LangChain's `message_to_dict` shape for messages, the receipt
            summary for compaction markers.
        run_id: The run that produced the event, if any.
        message_id: The message id; appending an id that the thread's transcript already
            holds is a no-op, so retries are idempotent.
        created_at: When it happened (timezone-aware); `None` means the time of the append.

    Raises:
        ValueError: On an unknown kind, a non-dict message or a naive `created_at`.
    """

    kind: EventKind
    message: dict[str, Any]
    run_id: str | None = None
    message_id: str | None = None
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"transcript event kind must be one of {sorted(EVENT_KINDS)}")
        if not isinstance(self.message, dict):
            raise ValueError("transcript event message must be a dict (a JSON object)")
        if self.message_id is not None and not (
            isinstance(self.message_id, str) and 0 < len(self.message_id) <= 512
        ):
            raise ValueError("transcript event message_id must be a string of 1-512 chars")
        if self.created_at is not None and self.created_at.utcoffset() is None:
            raise ValueError("transcript event created_at must be timezone-aware")


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """A stored transcript event with its per-thread sequence number.

    Attributes:
        thread_id: The thread.
        seq: Strictly increasing per thread, starting at 1.
        kind: `message` or `compaction`.
        run_id: The run that produced it, if any.
        message_id: The message id, if any.
        message: The JSON object stored.
        created_at: Event time (timezone-aware UTC).
    """

    thread_id: str
    seq: int
    kind: EventKind
    run_id: str | None
    message_id: str | None
    message: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ReceiptRecord:
    """A stored compaction receipt.

    Attributes:
        receipt_id: Increasing id, unique across threads.
        thread_id: The thread that was compacted.
        run_id: The run (or compaction run) that produced it, if any.
        receipt: The receipt as a JSON object.
        created_at: When it was stored (timezone-aware UTC).
    """

    receipt_id: int
    thread_id: str
    run_id: str | None
    receipt: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ThreadLock:
    """A live lease on a thread (one run or compaction at a time).

    Attributes:
        thread_id: The leased thread.
        holder: Who holds it (unique per operation, e.g. the run id).
        kind: What it is held for, e.g. `run` or `compact`.
        acquired_at: When the current holder took it (timezone-aware UTC).
        expires_at: When it lapses unless renewed (timezone-aware UTC).
        token: The fencing token: it grows by one with every acquisition of the thread's
            lease, so a write can check that the lease it was started under is still the
            current one.
    """

    thread_id: str
    holder: str
    kind: str
    acquired_at: datetime
    expires_at: datetime
    token: int = 0


@dataclass(frozen=True, slots=True)
class ThreadActivity:
    """A thread with what its transcript says about it (one row of a thread overview).

    Attributes:
        thread: The thread row.
        title: The text of its first human message, at most 120 characters (`""` if none):
            string content, else the first content block's text.
        message_count: Message entries of its transcript.
        compaction_count: Compaction markers of its transcript.
        context_tokens: Input tokens of the latest model call (`usage_metadata.input_tokens`
            of an AI message), or `tokens_after` of a later compaction; `None` if neither.
        context_source: `"call"` or `"compaction"`: which of the two `context_tokens` is.
    """

    thread: ThreadRecord
    title: str
    message_count: int
    compaction_count: int
    context_tokens: int | None
    context_source: Literal["call", "compaction"] | None


@dataclass(frozen=True, slots=True)
class TranscriptLocation:
    """Where a message, tool result or compaction sits in a transcript.

    Attributes:
        seq: The entry's sequence number.
        kind: `message` or `compaction`.
        message_id: The entry's message id.
        tool_call_id: The call a tool message answers, if it is one.
        archive_id: The archive artifact a compaction marker names, if any.
    """

    seq: int
    kind: EventKind
    message_id: str | None
    tool_call_id: str | None
    archive_id: str | None
