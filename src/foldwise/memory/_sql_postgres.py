"""The PostgreSQL dialect of `SqlMemoryBackend`: a sync `psycopg_pool` of autocommit connections.

Tables live in one schema (``foldwise`` by default, the gateway's): migrations run under a
transaction-scoped advisory lock so several workers can set up at once, and a write locks the
rows it changes (``FOR UPDATE``) so revision checks cannot race. Imported only for a
``postgresql://`` URL (psycopg is the ``postgres`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, LiteralString

import psycopg
from psycopg_pool import ConnectionPool

from foldwise._pg_check import check_connection
from foldwise.errors import StorageError
from foldwise.memory._sql_dialect import MIGRATIONS, PostgresSearch, Row, database_errors

__all__ = ["DEFAULT_SCHEMA", "PostgresDialect", "check_schema"]

DEFAULT_SCHEMA = "foldwise"
_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Conn = psycopg.Connection[tuple[Any, ...]]


def _native(query: str) -> LiteralString:
    # Queries come from this package's constant templates and a validated schema name only;
    # none holds a literal '?' or '%'.
    return query.replace("?", "%s")


def check_schema(schema: str) -> str:
    """`schema` if it is a plain SQL identifier, else `ValueError`."""
    if not isinstance(schema, str) or _SCHEMA.fullmatch(schema) is None:
        raise ValueError(
            "the Postgres schema must be 1-63 characters of A-Z, a-z, 0-9 and _, "
            "not starting with a digit"
        )
    return schema


class _Session:
    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        return self._conn.execute(_native(query), params).fetchone()

    def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(self._conn.execute(_native(query), params).fetchall())

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(_native(query), params)


class PostgresDialect(PostgresSearch):
    """PostgreSQL: a small connection pool, row locks, ``timestamptz``, a ``tsvector`` index.

    Args:
        dsn: A libpq connection string or URL (without the ``schema`` parameter).
        schema: The schema holding the memory tables (created by `open`).
        max_size: Connections in the pool.
        connect_timeout: Seconds to wait for the first connection.
    """

    name = "postgres"
    lock = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        max_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        self.schema = check_schema(schema)
        self.prefix = f'"{self.schema}".'  # the pattern admits no quote: this quoting is exact
        self._dsn = dsn
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._pool: ConnectionPool[Conn] | None = None

    def __repr__(self) -> str:
        return f"PostgresDialect(schema={self.schema!r})"

    def open(self) -> None:
        """Open the pool once and apply pending migrations."""
        if self._pool is not None:
            return
        pool: ConnectionPool[Conn] = ConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self._max_size,
            open=False,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self._connect_timeout))},
            check=check_connection,
            name=f"foldwise-memory-{self.schema}",
        )
        try:
            with database_errors(_ERRORS, "setup"):
                pool.open(wait=True, timeout=self._connect_timeout)
                with pool.connection() as conn, conn.transaction():
                    self._migrate(_Session(conn))
        except BaseException:
            pool.close()
            raise
        self._pool = pool

    def _migrate(self, session: _Session) -> None:
        session.execute(
            "SELECT pg_advisory_xact_lock(hashtext(?))", (f"foldwise:memory:{self.schema}",)
        )
        session.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        session.execute(
            self.sql(
                "CREATE TABLE IF NOT EXISTS {p}memory_schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        )
        done = {
            row[0]
            for row in session.fetchall(self.sql("SELECT version FROM {p}memory_schema_migrations"))
        }
        for version, name, statements in MIGRATIONS["postgres"]:
            if version in done:
                continue
            for statement in statements:
                session.execute(self.sql(statement))
            session.execute(
                self.sql("INSERT INTO {p}memory_schema_migrations (version, name) VALUES (?, ?)"),
                (version, name),
            )

    def close(self) -> None:
        """Close the pool; safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _opened(self) -> ConnectionPool[Conn]:
        if self._pool is None:
            raise StorageError("memory backend is not open; call setup() (or asetup()) first")
        return self._pool

    @contextmanager
    def read(self) -> Iterator[_Session]:
        """A pooled autocommit connection."""
        pool = self._opened()
        with database_errors(_ERRORS, "read"), pool.connection() as conn:
            yield _Session(conn)

    @contextmanager
    def write(self) -> Iterator[_Session]:
        """A pooled connection inside one transaction."""
        pool = self._opened()
        with database_errors(_ERRORS, "write"), pool.connection() as conn, conn.transaction():
            yield _Session(conn)

    def to_time(self, moment: datetime) -> datetime:
        """``timestamptz`` binds an aware datetime as it is."""
        return moment

    def from_time(self, value: Any) -> datetime:
        """``timestamptz`` reads back as an aware datetime."""
        return value  # type: ignore[no-any-return]
