"""`FencedPostgresSaver`: LangGraph's Postgres checkpointer with lease-fenced writes.

Kept apart from `foldwise.gateway._checkpointer` because psycopg is an optional extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg_pool import AsyncConnectionPool

from foldwise.gateway._leases import Lease, lease_of

__all__ = ["FencedPostgresSaver"]


class FencedPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose writes under a `Lease` commit only while the lease holds.

    A fenced write takes one pooled connection, opens a transaction, share-locks the lease row
    with the storage's check (a takeover's update waits for the commit) and runs the stock
    write on that connection, inside that transaction.

    Args:
        pool: The checkpointer's connection pool.
        serde: The serializer.
        lease_sql: The storage's lease check (`SqlGatewayStorage.lease_check_sql`).
    """

    def __init__(
        self, pool: AsyncConnectionPool[Any], *, serde: JsonPlusSerializer, lease_sql: str
    ) -> None:
        super().__init__(pool, serde=serde)
        self._pool = pool
        self._lease_sql = lease_sql

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint; under a lost lease raise `LeaseLostError` and save nothing."""
        lease = lease_of(config)
        if lease is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        async with self._fenced(lease) as writer:
            return await writer.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save pending writes; under a lost lease raise `LeaseLostError` and save nothing."""
        lease = lease_of(config)
        if lease is None:
            await super().aput_writes(config, writes, task_id, task_path)
            return
        async with self._fenced(lease) as writer:
            await writer.aput_writes(config, writes, task_id, task_path)

    @asynccontextmanager
    async def _fenced(self, lease: Lease) -> AsyncIterator[AsyncPostgresSaver]:
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                self._lease_sql,
                (lease.thread_id, lease.holder, lease.token),
            )
            if await cursor.fetchone() is None:
                raise lease.refuse()
            yield AsyncPostgresSaver(conn, serde=self.serde)
