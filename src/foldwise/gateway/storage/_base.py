"""Argument checks, error wrapping and row conversion used by `SqlGatewayStorage`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from foldwise.gateway.storage._codec import check_holder, check_ttl, clean_text, dumps
from foldwise.gateway.storage._errors import GatewayStorageError
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._records import (
    FINAL_RUN_STATUSES,
    RUN_KINDS,
    THREAD_STATUSES,
    EventKind,
    ReceiptRecord,
    RunKind,
    RunRecord,
    RunStatus,
    ThreadLock,
    ThreadRecord,
    ThreadStatus,
    TranscriptEntry,
    TranscriptEvent,
)

__all__ = [
    "LOCK_COLUMNS",
    "RECEIPT_COLUMNS",
    "RUN_COLUMNS",
    "THREAD_COLUMNS",
    "TRANSCRIPT_COLUMNS",
    "PreparedEvent",
    "check_finish_args",
    "check_lock_args",
    "check_run_args",
    "check_thread_status",
    "dedupe_events",
    "encode_metadata",
    "lock_from_row",
    "prepare_events",
    "receipt_from_row",
    "run_from_row",
    "thread_from_row",
    "transcript_from_row",
    "wrap_errors",
]

logger = logging.getLogger(__name__)

Row = Sequence[Any]
ToTime = Callable[[Any], datetime]


@contextmanager
def wrap_errors(
    operation: str, thread_id: str | None, errors: tuple[type[BaseException], ...]
) -> Iterator[None]:
    """Turn database exceptions into `GatewayStorageError` naming the operation and thread."""
    try:
        yield
    except errors as exc:
        logger.warning(
            "storage %s failed for thread %s: %s: %s",
            operation,
            thread_id,
            type(exc).__name__,
            exc,
        )
        raise GatewayStorageError(
            f"{type(exc).__name__}: {exc}", operation=operation, thread_id=thread_id
        ) from exc


def encode_metadata(metadata: Mapping[str, Any] | None) -> str:
    """Encode a metadata mapping as JSON text (`{}` for `None`)."""
    if metadata is None:
        return "{}"
    if not isinstance(metadata, Mapping):
        raise ValueError("metadata must be a mapping (a JSON object)")
    return dumps(dict(metadata))


def check_thread_status(status: str | None) -> None:
    """Raise `ValueError` unless `status` is `None` or a thread status."""
    if status is not None and status not in THREAD_STATUSES:
        raise ValueError(f"thread status must be one of {sorted(THREAD_STATUSES)}, got {status!r}")


def check_run_args(thread_id: str, run_id: str, assistant_id: str, kind: str) -> str:
    """Validate `create_run` arguments; return the cleaned assistant id."""
    validate_thread_id(thread_id)
    validate_run_id(run_id)
    if kind not in RUN_KINDS:
        raise ValueError(f"run kind must be one of {sorted(RUN_KINDS)}, got {kind!r}")
    if not isinstance(assistant_id, str) or not 0 < len(assistant_id) <= 256:
        raise ValueError("assistant_id must be a non-empty string of at most 256 characters")
    return clean_text(assistant_id)


def check_finish_args(run_id: str, status: str, error: str | None) -> str | None:
    """Validate `finish_run` arguments; return the cleaned error text."""
    validate_run_id(run_id)
    if status not in FINAL_RUN_STATUSES:
        raise ValueError(
            f"finished run status must be one of {sorted(FINAL_RUN_STATUSES)}, got {status!r}"
        )
    return None if error is None else clean_text(str(error))


def check_lock_args(
    thread_id: str, holder: str, kind: str | None = None, ttl_seconds: float | None = None
) -> tuple[str, str | None, float]:
    """Validate lease arguments; return the cleaned holder, kind and ttl (0.0 when absent)."""
    validate_thread_id(thread_id)
    check_holder(holder, kind)
    ttl = 0.0 if ttl_seconds is None else check_ttl(ttl_seconds)
    return clean_text(holder), (None if kind is None else clean_text(kind)), ttl


class PreparedEvent(NamedTuple):
    """A transcript event validated and encoded before the transaction starts."""

    kind: str
    run_id: str | None
    message_id: str | None
    message: str
    created_at: datetime


def prepare_events(events: Sequence[TranscriptEvent], now: datetime) -> list[PreparedEvent]:
    """Validate and encode events; events without `created_at` get `now`."""
    prepared: list[PreparedEvent] = []
    for event in events:
        if not isinstance(event, TranscriptEvent):
            raise ValueError("append_transcript takes TranscriptEvent objects")
        run_id = None if event.run_id is None else validate_run_id(event.run_id)
        message_id = None if event.message_id is None else clean_text(event.message_id)
        created_at = (event.created_at or now).astimezone(UTC)
        prepared.append(
            PreparedEvent(event.kind, run_id, message_id, dumps(event.message), created_at)
        )
    return prepared


def dedupe_events(events: Sequence[PreparedEvent], stored_ids: set[str]) -> list[PreparedEvent]:
    """Drop events whose message id is stored already or repeats earlier in the batch."""
    seen = set(stored_ids)
    kept: list[PreparedEvent] = []
    for event in events:
        if event.message_id is not None:
            if event.message_id in seen:
                continue
            seen.add(event.message_id)
        kept.append(event)
    return kept


def thread_from_row(
    row: Row, to_time: ToTime, to_json: Callable[[Any], dict[str, Any]]
) -> ThreadRecord:
    """Build a `ThreadRecord` from ``(thread_id, created_at, updated_at, metadata, status)``."""
    return ThreadRecord(
        thread_id=row[0],
        created_at=to_time(row[1]),
        updated_at=to_time(row[2]),
        metadata=to_json(row[3]),
        status=cast(ThreadStatus, row[4]),
    )


def run_from_row(row: Row, to_time: ToTime, to_json: Callable[[Any], dict[str, Any]]) -> RunRecord:
    """Build a `RunRecord` from the `RUN_COLUMNS` order."""
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        assistant_id=row[2],
        kind=cast(RunKind, row[3]),
        status=cast(RunStatus, row[4]),
        error=row[5],
        metadata=to_json(row[6]),
        created_at=to_time(row[7]),
        updated_at=to_time(row[8]),
    )


def transcript_from_row(
    row: Row, to_time: ToTime, to_json: Callable[[Any], dict[str, Any]]
) -> TranscriptEntry:
    """Build a `TranscriptEntry` from the `TRANSCRIPT_COLUMNS` order."""
    return TranscriptEntry(
        thread_id=row[0],
        seq=int(row[1]),
        kind=cast(EventKind, row[2]),
        run_id=row[3],
        message_id=row[4],
        message=to_json(row[5]),
        created_at=to_time(row[6]),
    )


def receipt_from_row(
    row: Row, to_time: ToTime, to_json: Callable[[Any], dict[str, Any]]
) -> ReceiptRecord:
    """Build a `ReceiptRecord` from the `RECEIPT_COLUMNS` order."""
    return ReceiptRecord(
        receipt_id=int(row[0]),
        thread_id=row[1],
        run_id=row[2],
        receipt=to_json(row[3]),
        created_at=to_time(row[4]),
    )


def lock_from_row(row: Row, to_time: ToTime) -> ThreadLock:
    """Build a `ThreadLock` from the `LOCK_COLUMNS` order."""
    return ThreadLock(
        thread_id=row[0],
        holder=row[1],
        kind=row[2],
        acquired_at=to_time(row[3]),
        expires_at=to_time(row[4]),
        token=int(row[5]),
    )


THREAD_COLUMNS = "thread_id, created_at, updated_at, metadata, status"
RUN_COLUMNS = (
    "run_id, thread_id, assistant_id, kind, status, error, metadata, created_at, updated_at"
)
TRANSCRIPT_COLUMNS = "thread_id, seq, kind, run_id, message_id, message, created_at"
RECEIPT_COLUMNS = "receipt_id, thread_id, run_id, receipt, created_at"
LOCK_COLUMNS = "thread_id, holder, kind, acquired_at, expires_at, token"
