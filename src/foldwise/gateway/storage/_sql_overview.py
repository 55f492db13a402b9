"""The read-only views of `SqlGatewayStorage` a thread list and a conversation page need.

A page of the thread overview is two queries, whatever the threads hold: one page of thread
rows (filtered by owner and, optionally, a case-insensitive substring of the thread id, its
title or its metadata values), then the titles, counts and latest context size of those rows
alone, each read from the transcript through its `(thread_id, seq)` key. Message JSON is read
inside the query with the dialect's JSON functions; no transcript is loaded into Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from foldwise.gateway.storage._base import THREAD_COLUMNS, TRANSCRIPT_COLUMNS, from_row
from foldwise.gateway.storage._codec import check_page
from foldwise.gateway.storage._ids import validate_thread_id
from foldwise.gateway.storage._records import (
    ThreadActivity,
    ThreadRecord,
    TranscriptEntry,
    TranscriptLocation,
)
from foldwise.gateway.storage._sql_events import SqlEventsMixin

__all__ = ["MAX_MODEL_CALLS", "MAX_QUERY_CHARS", "TITLE_CHARS", "SqlOverviewMixin", "like_pattern"]

TITLE_CHARS = 120
"""Longest thread title (the start of the first human message)."""
MAX_QUERY_CHARS = 200
"""Longest thread overview filter."""
MAX_MODEL_CALLS = 10_000
"""Largest page of `list_model_calls`."""
_MAX_LOCATE = 5_000
"""Most ids one `locate_transcript` call looks for (per kind)."""


def like_pattern(text: str) -> str:
    """A LIKE pattern (backslash escapes) matching `text` anywhere, lowercased."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _check_ids(values: Sequence[str], name: str) -> list[str]:
    ids = [v for v in values if isinstance(v, str) and v]
    if len(ids) > _MAX_LOCATE:
        raise ValueError(f"at most {_MAX_LOCATE} {name} per call, got {len(ids)}")
    return ids


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class SqlOverviewMixin(SqlEventsMixin):
    """Overview, paging and lookup reads of `SqlGatewayStorage` (see there)."""

    # SQL fragments over a transcript row aliased `e` -------------------------------------

    def _title_sql(self) -> str:
        """The title of a human message row `e`: string content, else the first block's text."""
        d = self._dialect
        m = "e.message"
        content = ("data", "content")

        def is_type(kind: str, *path: str | int) -> str:
            return f"{d.json_type(m, *path)} = '{kind}'"

        text = (
            f"CASE WHEN {is_type(d.json_string, *content)} THEN {d.json_text(m, *content)} "
            f"WHEN {is_type(d.json_array, *content)} THEN "
            f"CASE WHEN {is_type(d.json_string, *content, 0)} THEN {d.json_text(m, *content, 0)} "
            f"ELSE {d.json_text(m, *content, 0, 'text')} END END"
        )
        return f"SUBSTR({text}, 1, {TITLE_CHARS:d})"

    def _first_human_sql(self) -> str:
        """A scalar subquery: the title of thread `t`'s first human message (NULL if none)."""
        d = self._dialect
        return (
            f"(SELECT {self._title_sql()} FROM {{p}}transcript_events e "
            "WHERE e.thread_id = t.thread_id AND e.kind = 'message' "
            f"AND {d.json_text('e.message', 'type')} = 'human' ORDER BY e.seq LIMIT 1)"
        )

    def _input_tokens_sql(self, alias: str) -> str:
        return self._dialect.json_text(f"{alias}.message", "data", "usage_metadata", "input_tokens")

    # reads ---------------------------------------------------------------------------------

    async def count_transcript(self, thread_id: str) -> int:
        """How many entries (messages and compaction markers) the thread's transcript holds."""
        tid = validate_thread_id(thread_id)
        d = self._dialect
        async with d.read("count_transcript", tid) as s:
            row = await s.fetchone(
                d.sql("SELECT COUNT(*) FROM {p}transcript_events WHERE thread_id = ?"), (tid,)
            )
        return int(row[0]) if row else 0

    async def list_model_calls(self, thread_id: str, *, limit: int = 500) -> list[TranscriptEntry]:
        """The newest `limit` model calls of the thread, oldest first.

        A model call is a message entry whose message carries `usage_metadata.input_tokens`
        (an AI message as the provider answered it).
        """
        tid = validate_thread_id(thread_id)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_MODEL_CALLS
        ):
            raise ValueError(f"limit must be an integer in 1..{MAX_MODEL_CALLS}, got {limit!r}")
        query = (
            f"SELECT {TRANSCRIPT_COLUMNS} FROM {{p}}transcript_events e "
            "WHERE e.thread_id = ? AND e.kind = 'message' "
            f"AND {self._input_tokens_sql('e')} IS NOT NULL ORDER BY e.seq DESC LIMIT ?"
        )
        found = await self._fetch_all(TranscriptEntry, "list_model_calls", tid, query, (tid, limit))
        return found[::-1]

    async def thread_activity(
        self,
        *,
        owner: str,
        query: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[ThreadActivity]:
        """One page of `owner`'s threads, newest activity (`updated_at`) first, with their stats.

        Args:
            owner: The identity whose threads are listed.
            query: Keep threads whose id, title or a top-level metadata value contains it,
                ignoring case (LIKE wildcards in it are matched literally).
            thread_id: Only this thread (exact id).
            limit: Page size (1..1000).
            offset: Threads to skip.
        """
        check_page(limit, offset)
        if not isinstance(owner, str) or len(owner) > 256:
            raise ValueError("owner must be a string of at most 256 characters")
        if query is not None and (not isinstance(query, str) or len(query) > MAX_QUERY_CHARS):
            raise ValueError(f"query must be a string of at most {MAX_QUERY_CHARS} characters")
        d = self._dialect
        conditions = ["t.owner = ?"]
        params: list[Any] = [owner]
        if thread_id is not None:
            conditions.append("t.thread_id = ?")
            params.append(thread_id)
        if query:
            like = "{lower}(%s) LIKE ? ESCAPE '\\'"
            conditions.append(
                "("
                + " OR ".join(
                    (
                        like % "t.thread_id",
                        like % self._first_human_sql(),
                        f"EXISTS (SELECT 1 FROM {d.json_values('t.metadata')} j "
                        f"WHERE {like % 'j.value'})",
                    )
                )
                + ")"
            )
            params += [like_pattern(query)] * 3
        columns = ", ".join(f"t.{c.strip()}" for c in THREAD_COLUMNS.split(","))
        page_sql = (
            f"SELECT {columns} FROM {{p}}threads t WHERE {' AND '.join(conditions)} "
            "ORDER BY t.updated_at DESC, t.thread_id DESC LIMIT ? OFFSET ?"
        )
        async with d.read("thread_activity", None) as s:
            rows = await s.fetchall(d.sql(page_sql), [*params, limit, offset])
            threads = [from_row(ThreadRecord, row, d.from_time) for row in rows]
            if not threads:
                return []
            stats = await s.fetchall(
                d.sql(self._stats_sql(len(threads))), [t.thread_id for t in threads]
            )
        by_id = {str(r[0]): r for r in stats}
        return [self._activity(t, by_id.get(t.thread_id)) for t in threads]

    def _stats_sql(self, count: int) -> str:
        """Title, counts and latest context entry of `count` threads (by id).

        Each value is a scalar subquery over the thread's `(thread_id, seq)` key; the latest
        context entry is found by a backward scan that stops at the first match.
        """
        tokens = self._input_tokens_sql("x")
        after = self._dialect.json_text("x.message", "tokens_after")

        def counted(kind: str) -> str:
            return (
                "(SELECT COUNT(*) FROM {p}transcript_events c "
                f"WHERE c.thread_id = t.thread_id AND c.kind = '{kind}')"
            )

        def latest(what: str) -> str:
            return (
                f"(SELECT {what} FROM {{p}}transcript_events x WHERE x.thread_id = t.thread_id "
                f"AND (x.kind = 'compaction' OR {tokens} IS NOT NULL) "
                "ORDER BY x.seq DESC LIMIT 1)"
            )

        value = f"CASE WHEN x.kind = 'compaction' THEN {after} ELSE {tokens} END"
        return (
            f"SELECT t.thread_id, {self._first_human_sql()}, {counted('message')}, "
            f"{counted('compaction')}, {latest('x.kind')}, {latest(value)} "
            f"FROM {{p}}threads t WHERE t.thread_id IN ({', '.join('?' * count)})"
        )

    @staticmethod
    def _activity(thread: ThreadRecord, row: Sequence[Any] | None) -> ThreadActivity:
        if row is None:  # deleted between the two queries
            return ThreadActivity(thread, "", 0, 0, None, None)
        _, title, messages, compactions, kind, tokens = row
        source: Literal["call", "compaction"] | None = None
        value: int | None = None
        if kind is not None and tokens is not None:
            try:
                value = int(float(tokens))
            except (TypeError, ValueError):
                value = None
            if value is not None:
                source = "compaction" if kind == "compaction" else "call"
        return ThreadActivity(
            thread,
            title if isinstance(title, str) else "",
            int(messages or 0),
            int(compactions or 0),
            value,
            source,
        )

    async def locate_transcript(
        self,
        thread_id: str,
        *,
        message_ids: Sequence[str] = (),
        tool_call_ids: Sequence[str] = (),
        archive_ids: Sequence[str] = (),
    ) -> list[TranscriptLocation]:
        """Where messages (by id), tool results (by call id) and archives sit in a transcript.

        Returns:
            The matching entries, by `seq`: messages with one of `message_ids`, tool messages
            answering one of `tool_call_ids`, compaction markers naming one of `archive_ids`.
        """
        tid = validate_thread_id(thread_id)
        ids = _check_ids(message_ids, "message_ids")
        calls = _check_ids(tool_call_ids, "tool_call_ids")
        archives = _check_ids(archive_ids, "archive_ids")
        d = self._dialect
        call_sql = d.json_text("e.message", "data", "tool_call_id")
        archive_sql = d.json_text("e.message", "archive_id")
        alternatives: list[str] = []
        params: list[Any] = [tid]
        if ids:
            alternatives.append(f"e.message_id IN ({_marks(ids)})")
            params += ids
        if calls:
            alternatives.append(f"(e.kind = 'message' AND {call_sql} IN ({_marks(calls)}))")
            params += calls
        if archives:
            alternatives.append(
                f"(e.kind = 'compaction' AND {archive_sql} IN ({_marks(archives)}))"
            )
            params += archives
        if not alternatives:
            return []
        query = (
            f"SELECT e.seq, e.kind, e.message_id, {call_sql}, {archive_sql} "
            "FROM {p}transcript_events e "
            f"WHERE e.thread_id = ? AND ({' OR '.join(alternatives)}) ORDER BY e.seq"
        )
        async with d.read("locate_transcript", tid) as s:
            rows = await s.fetchall(d.sql(query), params)
        return [
            TranscriptLocation(
                seq=int(r[0]),
                kind=r[1],
                message_id=r[2],
                tool_call_id=r[3] if isinstance(r[3], str) else None,
                archive_id=r[4] if isinstance(r[4], str) else None,
            )
            for r in rows
        ]
