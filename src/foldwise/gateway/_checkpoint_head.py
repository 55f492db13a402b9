"""A thread's head checkpoint, read cheaply: its id and its pending interrupts.

Listings (`/threads/search`, `/threads/overview`, the idle/interrupted filters and counts) ask
every listed thread whether it is interrupted, and the transcript asks which checkpoint is the
head. `aget_tuple` would answer both, but it loads and deserializes the whole checkpoint (every
message) on the event loop. Here one indexed query on the checkpointer's own database returns
the newest checkpoint id of the root namespace and its pending ``__interrupt__`` writes; only
those writes are deserialized (with the checkpointer's own, strict, serializer).

The tables are LangGraph's, as its savers create them: ``checkpoints`` and ``writes`` for
the SQLite savers (also behind ``memory://``), ``checkpoints`` and ``checkpoint_writes`` for
`AsyncPostgresSaver`, whose pooled connections already have the ``?schema=`` as their search
path. A renamed table or column is an error here, not a silent fallback (the gateway tests on
both backends catch it). Other savers are read through `aget_tuple`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from foldwise.gateway._checkpointer_sqlite import FencedSqliteSaver
from foldwise.gateway._held_writes import held_writes_of
from foldwise.gateway._serde import jsonable

__all__ = ["INTERRUPT_CHANNEL", "CheckpointHead", "read_head"]

INTERRUPT_CHANNEL = "__interrupt__"
"""The channel of LangGraph's pending interrupt writes (private in `langgraph._internal`)."""

_HEAD_SQL = """
SELECT c.checkpoint_id, w.task_id, w.task_path, w.idx, w.type, w.{value}
FROM (
    SELECT checkpoint_id FROM checkpoints
    WHERE thread_id = {p} AND checkpoint_ns = ''
    ORDER BY checkpoint_id DESC LIMIT 1
) AS c
LEFT JOIN {writes} AS w
    ON w.thread_id = {p} AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id
    AND w.channel = {p}
"""
SQLITE_HEAD_SQL = _HEAD_SQL.format(value="value", writes="writes", p="?")
"""The head query on `AsyncSqliteSaver`'s tables."""
POSTGRES_HEAD_SQL = _HEAD_SQL.format(value="blob", writes="checkpoint_writes", p="%s")
"""The head query on `AsyncPostgresSaver`'s tables."""

HeadRow = tuple[str, str | None, str | None, int | None, str | None, bytes | None]
"""`(checkpoint_id, task_id, task_path, idx, type, value)`; the write columns are null when
the head has no interrupt write."""


@dataclass(frozen=True, slots=True)
class CheckpointHead:
    """The newest checkpoint of a thread's root namespace."""

    checkpoint_id: str
    """Its id (LangGraph's, time-ordered: a new checkpoint always has a new id)."""
    interrupts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Its pending interrupts by task id, JSON-ready (`Thread.interrupts`)."""


async def read_head(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str
) -> CheckpointHead | None:
    """The thread's head checkpoint id and pending interrupts; `None` without a checkpoint.

    Raises:
        Exception: The database error when LangGraph's tables are not as expected.
    """
    held = held_writes_of(checkpointer)
    if held is not None:
        await held.settle(thread_id)  # a run's held task writes (an interrupt's)
    if isinstance(checkpointer, FencedSqliteSaver):
        async with checkpointer.alock:  # inline: one indexed query
            params = (thread_id, thread_id, INTERRUPT_CHANNEL)
            rows = checkpointer.loop_conn.fetchall(SQLITE_HEAD_SQL, params)
    elif isinstance(checkpointer, AsyncSqliteSaver):
        rows = await _sqlite_rows(checkpointer, thread_id)
    elif _is_postgres(checkpointer):
        rows = await _postgres_rows(checkpointer, thread_id)
    else:
        return await _head_from_tuple(checkpointer, thread_id)
    return head_of(rows, checkpointer.serde)


def head_of(rows: Iterable[HeadRow], serde: SerializerProtocol) -> CheckpointHead | None:
    """The head from the rows of the head query (pure: deserializes only interrupt writes)."""
    rows = list(rows)
    if not rows:
        return None
    writes = [r for r in rows if r[1] is not None]
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _, task_id, _, _, type_, value in sorted(
        writes, key=lambda r: writes_sort_key(str(r[2] or ""), str(r[1]), int(r[3] or 0))
    ):
        found[str(task_id)].extend(_items(serde.loads_typed((str(type_), value or b""))))
    return CheckpointHead(str(rows[0][0]), dict(found))


def _items(value: Any) -> list[dict[str, Any]]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    return jsonable(items)  # type: ignore[no-any-return]


async def _sqlite_rows(saver: AsyncSqliteSaver, thread_id: str) -> list[HeadRow]:
    await saver.setup()
    params = (thread_id, thread_id, INTERRUPT_CHANNEL)
    async with saver.lock, saver.conn.execute(SQLITE_HEAD_SQL, params) as cursor:
        return [tuple(row) for row in await cursor.fetchall()]


def _is_postgres(checkpointer: BaseCheckpointSaver[Any]) -> bool:
    try:  # psycopg is an optional extra
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return False
    return isinstance(checkpointer, AsyncPostgresSaver)


@asynccontextmanager
async def _postgres_connection(saver: Any) -> AsyncIterator[Any]:
    """A pooled connection of its own, or the saver's single connection under its lock."""
    from psycopg_pool import AsyncConnectionPool

    if isinstance(saver.conn, AsyncConnectionPool):
        async with saver.conn.connection() as conn:
            yield conn
    else:
        async with saver.lock:
            yield saver.conn


async def _postgres_rows(saver: Any, thread_id: str) -> list[HeadRow]:
    from psycopg.rows import tuple_row

    params = (thread_id, thread_id, INTERRUPT_CHANNEL)
    async with _postgres_connection(saver) as conn, conn.cursor(row_factory=tuple_row) as cursor:
        await cursor.execute(POSTGRES_HEAD_SQL, params)
        return [tuple(row) for row in await cursor.fetchall()]


async def _head_from_tuple(
    checkpointer: BaseCheckpointSaver[Any], thread_id: str
) -> CheckpointHead | None:
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = await checkpointer.aget_tuple(config)
    if saved is None:
        return None
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for task_id, channel, value in saved.pending_writes or ():
        if channel == INTERRUPT_CHANNEL:
            found[str(task_id)].extend(_items(value))
    return CheckpointHead(str(saved.config["configurable"]["checkpoint_id"]), dict(found))
