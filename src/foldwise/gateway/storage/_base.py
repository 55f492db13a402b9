"""Argument checks, error wrapping and row conversion used by `SqlGatewayStorage`.

A table's columns are its record's fields, in order (`columns`), so one `from_row` reads
every table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar, get_type_hints

from foldwise.gateway.storage._codec import (
    check_holder,
    check_ttl,
    clean_text,
    dumps,
    loads_object,
)
from foldwise.gateway.storage._errors import GatewayStorageError
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._records import (
    FINAL_RUN_STATUSES,
    RUN_KINDS,
    THREAD_STATUSES,
    ReceiptRecord,
    RunRecord,
    ThreadLock,
    ThreadRecord,
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
    "columns",
    "dedupe_events",
    "encode_metadata",
    "from_row",
    "prepare_events",
    "wrap_errors",
]

logger = logging.getLogger(__name__)

Row = Sequence[Any]
ToTime = Callable[[Any], datetime]
R = TypeVar("R")


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


def columns(record: type[Any]) -> str:
    """The SQL column list of a record type: its field names, in order."""
    return ", ".join(f.name for f in fields(record))


Converter = Callable[[Any, ToTime], Any]
_CONVERTERS: dict[type[Any], tuple[Converter, ...]] = {}


def _converters(record: type[Any]) -> tuple[Converter, ...]:
    if record in _CONVERTERS:
        return _CONVERTERS[record]

    def pick(hint: Any) -> Converter:
        if hint is datetime:
            return lambda value, to_time: to_time(value)
        if hint == dict[str, Any]:
            return lambda value, _: loads_object(value)
        if hint is int:
            return lambda value, _: int(value)
        return lambda value, _: value  # text and literal types come back as stored

    hints = get_type_hints(record)
    _CONVERTERS[record] = tuple(pick(hints[f.name]) for f in fields(record))
    return _CONVERTERS[record]


def from_row(record: type[R], row: Row, to_time: ToTime) -> R:
    """Build a record from a row in `columns(record)` order.

    Times go through `to_time` (the dialect's reader), JSON objects through `loads_object`,
    integers through `int`; everything else is taken as stored.
    """
    pairs = zip(_converters(record), row, strict=True)
    return record(*(convert(value, to_time) for convert, value in pairs))


THREAD_COLUMNS = columns(ThreadRecord)
RUN_COLUMNS = columns(RunRecord)
TRANSCRIPT_COLUMNS = columns(TranscriptEntry)
RECEIPT_COLUMNS = columns(ReceiptRecord)
LOCK_COLUMNS = columns(ThreadLock)
