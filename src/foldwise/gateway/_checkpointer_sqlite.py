"""`FencedSqliteSaver`: LangGraph's SQLite checkpointer driven from the event loop, fenced.

LangGraph's `AsyncSqliteSaver` sends every statement, fetch and cursor close through
aiosqlite's thread: a fenced checkpoint write (``BEGIN IMMEDIATE``, the lease check, the
insert, ``COMMIT``) cost eight round trips between threads, and a run writes about fifteen.
This saver is LangGraph's sync `SqliteSaver` (same tables, same SQL, same serializer) on a
`LoopConnection`: reads run inline on the event loop, and each write is one transaction whose
two waits — SQLite's writer lock and the commit's sync — run in the connection's worker thread.

Every write is its own ``BEGIN IMMEDIATE`` transaction. Under a `Lease` (the run config's
`LEASE_KEY`) the lease row is checked inside that transaction first: the row is in the same
file, and SQLite's single writer lock keeps a takeover out until the commit. A lost lease
raises `LeaseLostError` and writes nothing. Without lease rows in this database
(``memory://``) the lease is verified through the gateway storage right before the
transaction, under the saver's lock.

The sync methods of `SqliteSaver` are not for use on this saver (the event loop owns the
connection): the gateway only calls the async ones.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from foldwise._crash import crash_point
from foldwise.gateway._leases import Lease, lease_of
from foldwise.gateway.storage._sqlite_conn import LoopConnection

__all__ = ["FencedSqliteSaver"]

_PUT_SQL = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_WRITES_SQL = (
    "INSERT OR {verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class FencedSqliteSaver(SqliteSaver):
    """LangGraph's `SqliteSaver` on a `LoopConnection`; writes under a `Lease` are fenced.

    Args:
        conn: The checkpointer's connection (open).
        serde: The serializer.
        lease_sql: The storage's lease check (`SqlGatewayStorage.lease_check_sql`) when the
            lease rows are in this database; `None` to check through the gateway storage.
    """

    def __init__(
        self, conn: LoopConnection, *, serde: JsonPlusSerializer, lease_sql: str | None
    ) -> None:
        super().__init__(conn.conn, serde=serde)
        self.loop_conn = conn
        self.alock = asyncio.Lock()
        """Held around every use of the connection from the event loop."""
        self._lease_sql = lease_sql

    async def asetup(self) -> None:
        """Create LangGraph's tables (in the worker thread: it may wait for the file)."""
        async with self.alock:
            await self.loop_conn.run(self.setup)

    # reads: inline ---------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """A checkpoint tuple (the newest of the thread without a `checkpoint_id`)."""
        async with self.alock:
            return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoint tuples, newest first (read at once, then yielded)."""
        async with self.alock:
            found = list(self.list(config, filter=filter, before=before, limit=limit))
        for item in found:
            yield item

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """LangGraph's delta-channel history read (beta `DeltaChannel` support)."""
        async with self.alock:
            return self.get_delta_channel_history(config=config, channels=channels)

    # writes: one transaction each ------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, lease: Lease | None) -> AsyncIterator[LoopConnection]:
        """One ``BEGIN IMMEDIATE`` transaction, checked against `lease` first when given.

        Raises:
            LeaseLostError: The lease is no longer this holder's (nothing is written).
        """
        async with self.alock:
            conn = self.loop_conn
            if lease is not None and self._lease_sql is None:
                await lease.verify()
            try:
                await conn.begin_immediate()
                if lease is not None and self._lease_sql is not None:
                    params = (lease.thread_id, lease.holder, lease.token)
                    if conn.fetchone(self._lease_sql, params) is None:
                        raise lease.refuse()
                yield conn
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint; under a lost lease raise `LeaseLostError` and save nothing."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable["checkpoint_ns"]
        type_, blob = self.serde.dumps_typed(checkpoint)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False)
        row = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            blob,
            meta.encode("utf-8", "ignore"),
        )
        lease = lease_of(config)
        if lease is not None:
            crash_point("checkpoint.before")  # tests only
        async with self.transaction(lease) as conn:
            conn.execute(_PUT_SQL, row)
        if lease is not None:
            crash_point("checkpoint.after")  # tests only
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save pending writes; under a lost lease raise `LeaseLostError` and save nothing."""
        configurable = config["configurable"]
        verb = "REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE"
        rows = [
            (
                str(configurable["thread_id"]),
                str(configurable["checkpoint_ns"]),
                str(configurable["checkpoint_id"]),
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        lease = lease_of(config)
        if lease is not None:
            crash_point("writes.before")  # tests only
        async with self.transaction(lease) as conn:
            conn.executemany(_WRITES_SQL.format(verb=verb), rows)
        if lease is not None:
            crash_point("writes.after")  # tests only

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes."""
        async with self.transaction(None) as conn:
            conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),))
            conn.execute("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),))
