"""The append-only half of `SqlGatewayStorage`: transcript events and compaction receipts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from foldwise.gateway.storage._base import (
    RECEIPT_COLUMNS,
    TRANSCRIPT_COLUMNS,
    PreparedEvent,
    R,
    columns,
    dedupe_events,
    from_row,
    prepare_events,
)
from foldwise.gateway.storage._codec import check_page, dumps, loads_object, utcnow
from foldwise.gateway.storage._ids import validate_run_id, validate_thread_id
from foldwise.gateway.storage._records import (
    EVENT_KINDS,
    EventKind,
    ReceiptRecord,
    TranscriptEntry,
    TranscriptEvent,
)

if TYPE_CHECKING:
    from foldwise.gateway.storage._dialect import Dialect, Session

__all__ = ["SqlEventsMixin"]


class SqlEventsMixin:
    """Transcript and receipt methods of `SqlGatewayStorage` (see there)."""

    _dialect: Dialect

    async def _require_thread(
        self, s: Session, thread_id: str, lock: str = "{keyshare}"
    ) -> None:  # pragma: no cover - defined by SqlGatewayStorage
        raise NotImplementedError

    async def _fetch_all(
        self,
        record: type[R],
        operation: str,
        thread_id: str | None,
        query: str,
        params: Sequence[Any],
    ) -> list[R]:
        """Run a `SELECT` of `record`'s columns (`{p}` etc. still in `query`) as `record`s."""
        d = self._dialect
        async with d.read(operation, thread_id) as s:
            rows = await s.fetchall(d.sql(query), params)
        return [from_row(record, row, d.from_time) for row in rows]

    async def _thread_page(
        self, record: type[R], table: str, order: str, thread_id: str, limit: int, offset: int
    ) -> list[R]:
        """One page of the thread's rows of `table` (as `record`s), sorted by `order`."""
        tid = validate_thread_id(thread_id)
        check_page(limit, offset)
        query = (
            f"SELECT {columns(record)} FROM {{p}}{table} WHERE thread_id = ? "
            f"ORDER BY {order} LIMIT ? OFFSET ?"
        )
        return await self._fetch_all(record, f"list_{table}", tid, query, (tid, limit, offset))

    # transcript ------------------------------------------------------------------------------

    async def _append(
        self, s: Session, thread_id: str, events: Sequence[PreparedEvent]
    ) -> list[TranscriptEntry]:
        # The caller holds the thread row's write lock, so MAX(seq) cannot move until commit.
        d = self._dialect
        ids = [e.message_id for e in events if e.message_id is not None]
        kept = dedupe_events(events, await self._stored_ids(s, thread_id, ids))
        if not kept:
            return []
        row = await s.fetchone(
            d.sql("SELECT COALESCE(MAX(seq), 0) FROM {p}transcript_events WHERE thread_id = ?"),
            (thread_id,),
        )
        first = int(row[0]) + 1 if row else 1
        entries = [
            TranscriptEntry(
                thread_id=thread_id,
                seq=first + i,
                kind=e.kind,  # type: ignore[arg-type]
                run_id=e.run_id,
                message_id=e.message_id,
                message=loads_object(e.message),
                created_at=e.created_at,
            )
            for i, e in enumerate(kept)
        ]
        await s.executemany(
            d.sql(
                f"INSERT INTO {{p}}transcript_events ({TRANSCRIPT_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, {json}, ?)"
            ),
            [
                (
                    thread_id,
                    x.seq,
                    x.kind,
                    x.run_id,
                    x.message_id,
                    e.message,
                    d.to_time(x.created_at),
                )
                for x, e in zip(entries, kept, strict=True)
            ],
        )
        return entries

    async def append_transcript(
        self, thread_id: str, events: Sequence[TranscriptEvent]
    ) -> list[TranscriptEntry]:
        """Append events atomically with consecutive new `seq` numbers; skip known message ids.

        Returns:
            The entries actually stored (duplicates of stored message ids are left out).
        """
        tid = validate_thread_id(thread_id)
        prepared = prepare_events(events, utcnow())
        if not prepared:
            return []
        async with self._dialect.write("append_transcript", tid) as s:
            await self._require_thread(s, tid, "{exclusive}")
            return await self._append(s, tid, prepared)

    async def _stored_ids(self, s: Session, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        marks = ", ".join("?" * len(ids))
        query = (
            "SELECT message_id FROM {p}transcript_events "
            f"WHERE thread_id = ? AND message_id IN ({marks})"
        )
        rows = await s.fetchall(self._dialect.sql(query), (thread_id, *ids))
        return {str(row[0]) for row in rows}

    async def stored_message_ids(self, thread_id: str, message_ids: Sequence[str]) -> set[str]:
        """Which of `message_ids` the thread's transcript holds (one indexed query)."""
        tid = validate_thread_id(thread_id)
        async with self._dialect.read("stored_message_ids", tid) as s:
            return await self._stored_ids(s, tid, list(message_ids))

    async def list_transcript(
        self,
        thread_id: str,
        *,
        after_seq: int = 0,
        limit: int = 100,
        before_seq: int | None = None,
        kind: EventKind | None = None,
    ) -> list[TranscriptEntry]:
        """Entries with `seq > after_seq`, ascending, at most `limit`.

        With `before_seq`, the newest `limit` entries with `after_seq < seq < before_seq`
        instead (still returned in ascending order): a page backwards. With `kind`, only
        entries of that kind.
        """
        tid = validate_thread_id(thread_id)
        check_page(limit)
        if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
            raise ValueError(f"after_seq must be a non-negative integer, got {after_seq!r}")
        conditions = ["thread_id = ?", "seq > ?"]
        params: list[Any] = [tid, after_seq]
        if before_seq is not None:
            if isinstance(before_seq, bool) or not isinstance(before_seq, int) or before_seq < 1:
                raise ValueError(f"before_seq must be a positive integer, got {before_seq!r}")
            conditions.append("seq < ?")
            params.append(before_seq)
        if kind is not None:
            if kind not in EVENT_KINDS:
                raise ValueError(f"kind must be one of {sorted(EVENT_KINDS)}, got {kind!r}")
            conditions.append("kind = ?")
            params.append(kind)
        order = "seq" if before_seq is None else "seq DESC"
        query = (
            f"SELECT {TRANSCRIPT_COLUMNS} FROM {{p}}transcript_events "
            f"WHERE {' AND '.join(conditions)} ORDER BY {order} LIMIT ?"
        )
        params.append(limit)
        found = await self._fetch_all(TranscriptEntry, "list_transcript", tid, query, params)
        return found if before_seq is None else found[::-1]

    # receipts --------------------------------------------------------------------------------

    async def add_receipt(
        self,
        thread_id: str,
        receipt: Mapping[str, Any],
        *,
        run_id: str | None = None,
        marker: TranscriptEvent | None = None,
    ) -> ReceiptRecord:
        """Store a compaction receipt (and, in the same transaction, an optional marker)."""
        tid = validate_thread_id(thread_id)
        if run_id is not None:
            validate_run_id(run_id)
        if not isinstance(receipt, Mapping):
            raise ValueError("receipt must be a mapping (a JSON object)")
        body = dumps(dict(receipt))
        prepared = prepare_events([marker], utcnow()) if marker is not None else []
        key = receipt.get("id")
        key = None if key is None else str(key)  # the receipt's own id makes a retry a no-op
        d = self._dialect
        async with d.write("add_receipt", tid) as s:
            await self._require_thread(s, tid, "{exclusive}")
            row = None
            if key is not None:
                row = await s.fetchone(
                    d.sql(
                        f"SELECT {RECEIPT_COLUMNS} FROM {{p}}receipts "
                        "WHERE thread_id = ? AND receipt_key = ?"
                    ),
                    (tid, key),
                )
            if row is None:
                row = await s.fetchone(
                    d.sql(
                        "INSERT INTO {p}receipts (thread_id, run_id, receipt, created_at, "
                        f"receipt_key) VALUES (?, ?, {{json}}, ?, ?) RETURNING {RECEIPT_COLUMNS}"
                    ),
                    (tid, run_id, body, d.to_time(utcnow()), key),
                )
                if prepared:
                    await self._append(s, tid, prepared)
        assert row is not None  # INSERT ... RETURNING always yields the row
        return from_row(ReceiptRecord, row, d.from_time)

    async def list_receipts(
        self, thread_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[ReceiptRecord]:
        """The thread's receipts, oldest first."""
        return await self._thread_page(
            ReceiptRecord, "receipts", "receipt_id", thread_id, limit, offset
        )
