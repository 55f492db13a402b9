"""`FencedSqliteSaver`: LangGraph's SQLite checkpointer driven from the event loop, fenced.

LangGraph's `AsyncSqliteSaver` sends every statement, fetch and cursor close through
aiosqlite's thread: a fenced checkpoint write (``BEGIN IMMEDIATE``, the lease check, the
insert, ``COMMIT``) cost eight round trips between threads, and a run writes about fifteen.
This saver is LangGraph's sync `SqliteSaver` (same tables, same SQL, same serializer) on a
`LoopConnection`: a read is one call to the connection's worker thread (a checkpoint blob can
be megabytes: reading and decoding it inline would stall the event loop), and each write is one
transaction whose statements run inline and whose two waits — SQLite's writer lock and the
commit's sync — run in the worker thread.

A checkpoint's blob is LangGraph's (the serializer's msgpack of the whole checkpoint), packed
by `ChannelPacker`: channels a step did not change are spliced from the bytes packed for the
step before instead of being encoded again. A channel value packed to `ROW_MIN_BYTES` or more
(the message list, in practice) is stored once per version in ``foldwise_channel_values`` (as
LangGraph's PostgreSQL saver stores ``checkpoint_blobs``), written with ``INSERT OR IGNORE`` in
the checkpoint's transaction by every checkpoint that holds it; the blob lists it under
`VALUES_KEY`. A step that does not change the messages then writes a blob of a few hundred bytes
instead of the whole history. The reads (`get_tuple`, `list`) put the values back, each in one
read transaction (another worker's delete cannot fall between a checkpoint and its rows), so a
tuple reads as LangGraph's saver would return it; blobs without the key (older databases) are
returned as they are, and a missing row is a `StorageError` naming thread, channel and version.

One transaction per step. LangGraph saves a step's task writes (`aput_writes`) as each task
ends and then the step's checkpoint (`aput`): two commits, each a sync of the WAL. Writes
under a `Lease` (a run's steps) are therefore held in memory (`HeldWrites`, shared with the
Postgres saver: `foldwise.gateway._held_writes` states the contract) and committed in the same
transaction as the thread's next checkpoint; a read of the thread, or `flush_writes` (the gateway
calls it when a run ends, e.g. after an interrupt or an error, when no checkpoint follows),
commits them on their own first. A commit that fails or is cancelled keeps them held (the
run's end commits them, as LangGraph's saver would have). A crash before that commit loses
the step's writes and its checkpoint together: the step runs again, as after a crash during
the step. Writes without a lease, and deletions, are one transaction each.

Under a `Lease` (the run config's `LEASE_KEY`) the lease row is checked inside the
transaction first: the row is in the same
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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

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
from foldwise.errors import StorageError
from foldwise.gateway._checkpoint_pack import VALUES_KEY, ChannelPacker
from foldwise.gateway._errors import LeaseLostError
from foldwise.gateway._held_writes import HeldWrites
from foldwise.gateway._leases import Lease, lease_of
from foldwise.gateway.storage._sqlite_conn import LoopConnection

__all__ = ["ROW_MIN_BYTES", "FencedSqliteSaver"]

T = TypeVar("T")

ROW_MIN_BYTES = 16 * 1024
"""Channel values packed to this many bytes or more are stored in their own rows."""

_VALUES_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS foldwise_channel_values (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL, version TEXT NOT NULL, "
    "type TEXT, value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, channel, version))"
)
_VALUES_SQL = (
    "INSERT OR IGNORE INTO foldwise_channel_values (thread_id, checkpoint_ns, channel, "
    "version, type, value) VALUES (?, ?, ?, ?, ?, ?)"
)
_VALUE_SQL = (
    "SELECT type, value FROM foldwise_channel_values "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
)

_PUT_SQL = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_WRITES_SQL = (
    "INSERT OR {verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_Writes = tuple[str, list[tuple[Any, ...]]]
"""Task writes waiting for their step's checkpoint: the statement and its rows."""


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
        self.held_writes: HeldWrites[_Writes] = HeldWrites(self._commit_writes)
        """A run's task writes, held until its step's checkpoint, a read or a flush."""
        self._packer = ChannelPacker(serde)

    async def asetup(self) -> None:
        """Create LangGraph's tables (in the worker thread: it may wait for the file)."""
        async with self.alock:
            await self.loop_conn.run(self.setup)

    def setup(self) -> None:
        """LangGraph's tables and ``foldwise_channel_values`` (each only if missing)."""
        if self.is_setup:
            return
        self.conn.execute(_VALUES_TABLE_SQL)
        super().setup()

    # sync reads (run in the connection's worker thread): large values put back ------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """LangGraph's `get_tuple`, the values stored in their own rows put back."""
        return self._in_snapshot(self._get_tuple, config)

    def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        return None if found is None else self._with_rows(found)

    def _in_snapshot(self, read: Callable[..., T], *args: Any) -> T:
        """``read(*args)`` in one read transaction (a savepoint: nested in one already open).

        A checkpoint and its rows are then read from one snapshot: a thread deleted meanwhile
        by another process (workers on one file) is read whole, not as a checkpoint whose
        rows are gone (a `StorageError`). Without it, `list`'s last tuple too would read its
        rows after the listing statement ended.
        """
        self.setup()  # not inside: LangGraph's setup script commits
        self.conn.execute("SAVEPOINT foldwise_read")
        try:
            return read(*args)
        finally:
            self.conn.execute("RELEASE foldwise_read")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """LangGraph's `list`, the values stored in their own rows put back."""
        for found in super().list(config, filter=filter, before=before, limit=limit):
            yield self._with_rows(found)

    def _with_rows(self, found: CheckpointTuple) -> CheckpointTuple:
        """`found` with the channel values its blob lists under `VALUES_KEY` read back.

        Raises:
            StorageError: A listed value has no row (names thread, channel and version).
        """
        checkpoint: dict[str, Any] = found.checkpoint  # type: ignore[assignment]
        refs = checkpoint.pop(VALUES_KEY, None)
        if not refs:
            return found
        configurable = found.config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        values = checkpoint["channel_values"]
        for channel, version in refs.items():
            key = (thread_id, checkpoint_ns, channel, str(version))
            row = self.conn.execute(_VALUE_SQL, key).fetchone()
            if row is None:
                raise StorageError(
                    f"thread {thread_id}: checkpoint {checkpoint['id']} lists channel "
                    f"{channel!r} at version {version}, but foldwise_channel_values has no "
                    "such row (the database was changed outside foldwise?)"
                )
            values[channel] = self.serde.loads_typed((row[0], row[1]))
        return found

    # reads: one call each in the worker thread ----------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """A checkpoint tuple (the newest of the thread without a `checkpoint_id`)."""
        await self.held_writes.settle(str(config["configurable"]["thread_id"]))
        async with self.alock:
            return await self.loop_conn.run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoint tuples, newest first (read at once, then yielded)."""
        await self.held_writes.settle_listed(config)
        async with self.alock:
            found = await self.loop_conn.run(
                lambda: self._in_snapshot(
                    lambda: list(self.list(config, filter=filter, before=before, limit=limit))
                )
            )
        for item in found:
            yield item

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """LangGraph's delta-channel history read (beta `DeltaChannel` support)."""
        await self.held_writes.settle(str(config["configurable"]["thread_id"]))
        async with self.alock:
            return await self.loop_conn.run(
                lambda: self.get_delta_channel_history(config=config, channels=channels)
            )

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
        parent = configurable.get("checkpoint_id")
        thread = (thread_id, checkpoint_ns)
        packed = self._packer.pack(
            thread, parent, checkpoint, new_versions, own_rows_from=ROW_MIN_BYTES
        )
        values = [(thread_id, checkpoint_ns, *row) for row in packed.rows]
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False)
        row = (
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            parent,
            packed.type,
            packed.blob,
            meta.encode("utf-8", "ignore"),
        )
        lease = lease_of(config)
        held = await self.held_writes.take(thread_id, lease)
        if lease is not None:
            crash_point("checkpoint.before")  # tests only
        try:
            async with self.transaction(lease) as conn:
                for _, (sql, rows) in held:  # the step's task writes: same transaction
                    conn.executemany(sql, rows)
                if values:  # every time: the parent may be older than this table
                    conn.executemany(_VALUES_SQL, values)
                conn.execute(_PUT_SQL, row)
        except LeaseLostError:
            raise
        except BaseException:
            self.held_writes.keep(thread_id, held)  # rolled back: the run's end commits them
            raise
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
        sql = _WRITES_SQL.format(verb=verb)
        if lease is None:
            async with self.transaction(None) as conn:
                conn.executemany(sql, rows)
            return
        # A run's step: committed with the step's checkpoint (or by `HeldWrites.flush`).
        self.held_writes.hold(str(configurable["thread_id"]), lease, (sql, rows))

    async def _commit_writes(self, lease: Lease, held: Sequence[_Writes]) -> None:
        """Commit held task writes on their own, in one transaction under `lease`."""
        async with self.transaction(lease) as conn:
            for sql, rows in held:
                conn.executemany(sql, rows)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints, their stored values and writes (held ones too)."""
        self.held_writes.drop(str(thread_id))
        self._packer.forget_thread(str(thread_id))
        async with self.transaction(None) as conn:
            conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),))
            conn.execute(
                "DELETE FROM foldwise_channel_values WHERE thread_id = ?", (str(thread_id),)
            )
            conn.execute("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),))
