"""`FencedPostgresSaver`: LangGraph's Postgres checkpointer with lease-fenced writes.

Kept apart from `foldwise.gateway._checkpointer` because psycopg is an optional extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg_pool import AsyncConnectionPool

from foldwise.gateway._checkpointer import FencedWrites
from foldwise.gateway._leases import Lease

__all__ = ["FencedPostgresSaver"]


class FencedPostgresSaver(FencedWrites, AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose writes under a `Lease` commit only while the lease holds.

    A fenced write takes one pooled connection, opens a transaction, share-locks the lease row
    with the storage's check (a takeover's update waits for the commit) and runs the stock
    write on that connection, inside that transaction: a step's held task writes, then its
    checkpoint (`FencedWrites`).

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

    @asynccontextmanager
    async def _fenced(self, lease: Lease) -> AsyncIterator[BaseCheckpointSaver[str]]:
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                self._lease_sql,
                (lease.thread_id, lease.holder, lease.token),
            )
            if await cursor.fetchone() is None:
                raise lease.refuse()
            yield AsyncPostgresSaver(conn, serde=self.serde)
