"""Postgres dialect of `SqlGatewayStorage` (psycopg 3 async + `psycopg_pool`), and its class.

All tables live in one schema (``foldwise`` by default). Several workers may share the
database: migrations run under a transaction-scoped advisory lock, writes lock the rows they
read (the thread row ``FOR NO KEY UPDATE`` for transcript appends, so `seq` numbers are
consecutive), and lease times come from ``clock_timestamp()``, the database clock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, LiteralString

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from foldwise._pg_check import check_async_connection
from foldwise.gateway.storage._base import wrap_errors
from foldwise.gateway.storage._dialect import Dialect, Row, not_open
from foldwise.gateway.storage._migrations import Migration
from foldwise.gateway.storage._sql import SqlGatewayStorage

__all__ = ["DEFAULT_SCHEMA", "PostgresDialect", "PostgresGatewayStorage"]

logger = logging.getLogger(__name__)

DEFAULT_SCHEMA = "foldwise"
"""The schema of the gateway tables when the URL names none."""

_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
_SCHEMA_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Conn = AsyncConnection[tuple[Any, ...]]


def _native(query: str) -> LiteralString:
    # Queries are built from this package's constant templates and validated identifiers only;
    # no query contains a literal '?' or '%'.
    # (mypy treats LiteralString as str; psycopg's annotation is for stricter checkers.)
    return query.replace("?", "%s")


_PATH_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _path_args(path: Sequence[str | int]) -> str:
    steps = [str(step) if isinstance(step, int) else step for step in path]
    for step in steps:  # pragma: no branch - paths are constants of this package
        if not (step.isdigit() or _PATH_KEY.fullmatch(step)):
            raise ValueError(f"unsupported JSON path key {step!r}")
    return ", ".join(f"'{step}'" for step in steps)


class _Session:
    """`Session` over a psycopg connection: ``?`` placeholders become ``%s``."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        cursor = await self._conn.execute(_native(query), params)
        return await cursor.fetchone()

    async def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = await self._conn.execute(_native(query), params)
        return list(await cursor.fetchall())

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        cursor = await self._conn.execute(_native(query), params)
        return cursor.rowcount

    async def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        async with self._conn.cursor() as cursor:
            await cursor.executemany(_native(query), rows)


def check_schema(schema: str) -> str:
    """Return `schema` if it is a plain SQL identifier; raise `ValueError` otherwise."""
    if not isinstance(schema, str) or _SCHEMA_PATTERN.fullmatch(schema) is None:
        raise ValueError(
            f"invalid Postgres schema name {schema!r}: use 1-63 characters from "
            "A-Z, a-z, 0-9 and '_', not starting with a digit"
        )
    return schema


class PostgresDialect(Dialect):
    """Postgres: a connection pool, row locks, `jsonb`, `timestamptz` leases."""

    backend = "postgres"
    json_param = "CAST(? AS jsonb)"
    now = "clock_timestamp()"
    later = "(clock_timestamp() + make_interval(secs => ?))"
    json_string = "string"
    key_share_lock = " FOR KEY SHARE"
    share_lock = " FOR SHARE"
    exclusive_lock = " FOR NO KEY UPDATE"

    def __init__(
        self, dsn: str, schema: str, *, min_size: int, max_size: int, connect_timeout: float
    ) -> None:
        self.schema = check_schema(schema)
        self.prefix = f'"{schema}".'  # the pattern admits no quote, so this quoting is exact
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool[Conn] | None = None

    def __repr__(self) -> str:
        return f"schema={self.schema!r}"

    def native(self, query: str) -> str:
        """psycopg's ``%s`` placeholders."""
        return _native(query)

    # connection ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the pool once (autocommit connections)."""
        if self._pool is not None:
            return
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self._connect_timeout))},
            check=check_async_connection,
            name=f"foldwise-{self.schema}",
        )
        try:
            with wrap_errors("setup", None, _ERRORS):
                await pool.open(wait=True, timeout=self._connect_timeout)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def close(self) -> None:
        """Close the pool; safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def read(self, operation: str, thread_id: str | None) -> AsyncIterator[_Session]:
        """A pooled autocommit connection (or this task's `batch`)."""
        joined = self.joined()
        if joined is not None:
            yield joined  # type: ignore[misc]
            return
        if self._pool is None:
            raise not_open(operation, thread_id)
        with wrap_errors(operation, thread_id, _ERRORS):
            async with self._pool.connection() as conn:
                yield _Session(conn)

    @asynccontextmanager
    async def write(self, operation: str, thread_id: str | None) -> AsyncIterator[_Session]:
        """A pooled connection inside one transaction (or this task's `batch`)."""
        joined = self.joined()
        if joined is not None:
            yield joined  # type: ignore[misc]
            return
        if self._pool is None:
            raise not_open(operation, thread_id)
        with wrap_errors(operation, thread_id, _ERRORS):
            async with self._pool.connection() as conn, conn.transaction():
                yield _Session(conn)

    # values ----------------------------------------------------------------------------------

    def to_time(self, moment: datetime) -> datetime:
        """`timestamptz` binds a timezone-aware datetime as it is."""
        return moment

    def from_time(self, value: Any) -> datetime:
        """Normalize a `timestamptz` (returned in the session time zone) to UTC."""
        if not isinstance(value, datetime):  # pragma: no cover - the schema stores timestamptz
            raise TypeError(f"expected a datetime from Postgres, got {type(value).__name__}")
        return value.astimezone(UTC)

    from_lease_time = from_time

    def json_contains(self, column: str) -> str:
        """`jsonb` containment (served by the GIN index on threads.metadata)."""
        return f"{column} @> CAST(? AS jsonb)"

    def json_text(self, column: str, *path: str | int) -> str:
        """``jsonb_extract_path_text`` (array indexes as text steps)."""
        return f"jsonb_extract_path_text({column}, {_path_args(path)})"

    def json_type(self, column: str, *path: str | int) -> str:
        """``jsonb_typeof`` (`string`, `array`, `object`, `number`...)."""
        return f"jsonb_typeof(jsonb_extract_path({column}, {_path_args(path)}))"

    def json_values(self, column: str) -> str:
        """``jsonb_each_text`` of the object."""
        return f"jsonb_each_text({column})"

    # migrations ------------------------------------------------------------------------------

    def setup_statements(self) -> Sequence[tuple[str, Sequence[Any]]]:
        """Serialize concurrent setups on an advisory lock; create the schema and the ledger."""
        return [
            ("SELECT pg_advisory_xact_lock(hashtext(?))", (f"foldwise:migrate:{self.schema}",)),
            (f"CREATE SCHEMA IF NOT EXISTS {self.prefix[:-1]}", ()),
            (
                f"CREATE TABLE IF NOT EXISTS {self.prefix}schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
                (),
            ),
        ]

    def migration_statements(self, migration: Migration) -> Sequence[str]:
        """The migration's Postgres statements, with ``{schema}`` the quoted schema."""
        return [s.replace("{schema}", self.prefix[:-1]) for s in migration.postgres]


class PostgresGatewayStorage(SqlGatewayStorage):
    """Gateway tables in a Postgres schema, shared safely by several worker processes.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        schema: The schema holding the tables (created by `setup`).
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens.
        connect_timeout: Seconds to wait for the first connection in `setup`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        check_schema(schema)
        if not 1 <= min_size <= max_size:
            raise ValueError("pool sizes must satisfy 1 <= min_size <= max_size")
        self._postgres = PostgresDialect(
            dsn,
            schema,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=float(connect_timeout),
        )
        super().__init__(self._postgres)

    @property
    def schema(self) -> str:
        """The Postgres schema that holds the tables."""
        return self._postgres.schema
