"""Connection plumbing of the Postgres backend: pool, schema, migrations, transactions."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool

from foldwise.errors import ThreadNotFoundError
from foldwise.gateway.storage._base import StorageBase, wrap_errors
from foldwise.gateway.storage._errors import GatewayStorageError
from foldwise.gateway.storage._migrations import check_not_newer, pending_migrations

__all__ = ["DB_ERRORS", "Conn", "PostgresBase", "from_db_time"]

logger = logging.getLogger(__name__)

DB_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
_SCHEMA_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Conn = AsyncConnection[tuple[Any, ...]]


def from_db_time(value: Any) -> datetime:
    """Normalize a `timestamptz` (returned in the session time zone) to UTC."""
    if not isinstance(value, datetime):  # pragma: no cover - the schema only stores timestamptz
        raise TypeError(f"expected a datetime from Postgres, got {type(value).__name__}")
    return value.astimezone(UTC)


class PostgresBase(StorageBase):
    """Pool, schema, migrations and transaction helpers (see `PostgresGatewayStorage`)."""

    backend = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "foldwise",
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        if not isinstance(schema, str) or _SCHEMA_PATTERN.fullmatch(schema) is None:
            raise ValueError(
                f"invalid Postgres schema name {schema!r}: use 1-63 characters from "
                "A-Z, a-z, 0-9 and '_', not starting with a digit"
            )
        if not 1 <= min_size <= max_size:
            raise ValueError("pool sizes must satisfy 1 <= min_size <= max_size")
        self._dsn = dsn
        self._schema = schema
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = float(connect_timeout)
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._setup_lock = asyncio.Lock()

    @property
    def schema(self) -> str:
        """The Postgres schema that holds the tables."""
        return self._schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self._schema!r})"

    def q(self, template: LiteralString) -> sql.Composed:
        """Compose `template`, replacing ``{schema}`` with the quoted schema identifier."""
        return sql.SQL(template).format(schema=sql.Identifier(self._schema))

    # lifecycle -------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Open the pool (once) and apply pending migrations under an advisory lock."""
        async with self._setup_lock:
            await self._open_pool()
            await self._migrate()

    async def _open_pool(self) -> None:
        if self._pool is None:
            pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                self._dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                open=False,
                kwargs={"autocommit": True, "connect_timeout": max(1, int(self._connect_timeout))},
                check=AsyncConnectionPool.check_connection,
                name=f"foldwise-{self._schema}",
            )
            try:
                with wrap_errors("setup", None, DB_ERRORS):
                    await pool.open(wait=True, timeout=self._connect_timeout)
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def _migrate(self) -> None:
        async with self.transaction("setup", None) as conn:
            # Serializes concurrent setup() calls across processes; released at commit.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"foldwise:migrate:{self._schema}",)
            )
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
            )
            await conn.execute(
                self.q(
                    "CREATE TABLE IF NOT EXISTS {schema}.schema_migrations ("
                    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                    "applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
                )
            )
            rows = await self.fetchall(
                conn, self.q("SELECT version FROM {schema}.schema_migrations")
            )
            applied = [int(r[0]) for r in rows]
            problem = check_not_newer(applied)
            if problem:
                raise GatewayStorageError(problem, operation="setup")
            for migration in pending_migrations(applied):
                for statement in migration.postgres:
                    await conn.execute(self.q(statement))
                await conn.execute(
                    self.q(
                        "INSERT INTO {schema}.schema_migrations (version, name) VALUES (%s, %s)"
                    ),
                    (migration.version, migration.name),
                )
                logger.info(
                    "applied Postgres migration %d (%s) to schema %s",
                    migration.version,
                    migration.name,
                    self._schema,
                )

    async def aclose(self) -> None:
        """Close the pool; safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require_pool(self, operation: str, thread_id: str | None) -> AsyncConnectionPool[Conn]:
        if self._pool is None:
            raise GatewayStorageError(
                "storage is not open; await setup() (or use `async with`) first",
                operation=operation,
                thread_id=thread_id,
            )
        return self._pool

    @asynccontextmanager
    async def connection(self, operation: str, thread_id: str | None) -> AsyncIterator[Conn]:
        """A pooled autocommit connection; database errors become `GatewayStorageError`."""
        pool = self._require_pool(operation, thread_id)
        with wrap_errors(operation, thread_id, DB_ERRORS):
            async with pool.connection() as conn:
                yield conn

    @asynccontextmanager
    async def transaction(self, operation: str, thread_id: str | None) -> AsyncIterator[Conn]:
        """A pooled connection inside one transaction (rolled back on any exception)."""
        async with self.connection(operation, thread_id) as conn, conn.transaction():
            yield conn

    @staticmethod
    async def fetchone(
        conn: Conn, query: sql.Composed | sql.SQL, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> tuple[Any, ...] | None:
        """Execute and return the first row."""
        cursor = await conn.execute(query, params)
        return await cursor.fetchone()

    @staticmethod
    async def fetchall(
        conn: Conn, query: sql.Composed | sql.SQL, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Execute and return every row."""
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()

    async def lock_thread_row(self, conn: Conn, thread_id: str) -> None:
        """Lock the thread row until commit; raise `ThreadNotFoundError` if it is absent."""
        row = await self.fetchone(
            conn,
            self.q("SELECT 1 FROM {schema}.threads WHERE thread_id = %s FOR NO KEY UPDATE"),
            (thread_id,),
        )
        if row is None:
            raise ThreadNotFoundError(thread_id)

    async def ping(self) -> None:
        """Run ``SELECT 1``."""
        async with self.connection("ping", None) as conn:
            await conn.execute("SELECT 1")

    async def schema_version(self) -> int:
        """Return the highest applied migration number."""
        async with self.connection("schema_version", None) as conn:
            row = await self.fetchone(
                conn, self.q("SELECT MAX(version) FROM {schema}.schema_migrations")
            )
        return int(row[0] or 0) if row else 0
