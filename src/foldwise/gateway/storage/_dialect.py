"""What differs between the SQL databases behind `SqlGatewayStorage`, and nothing else.

`SqlGatewayStorage` writes every query once, with ``?`` placeholders and a few named slots
that a `Dialect` fills in (`Dialect.sql`):

- ``{p}``: the table prefix (nothing for SQLite, the quoted schema and a dot for Postgres);
- ``{json}``: how a JSON text parameter is bound (``?`` or ``CAST(? AS jsonb)``);
- ``{now}``: the database clock as lease times store it (epoch seconds or `timestamptz`);
- ``{later}``: ``{now}`` plus ``?`` seconds;
- ``{keyshare}`` / ``{share}`` / ``{exclusive}``: the row lock a `SELECT` takes inside a write
  transaction: against deletion, against any update, against other writers (empty for
  SQLite, whose ``BEGIN IMMEDIATE`` already holds the only writer lock);
- ``{lower}``: the case-folding function of substring filters.

JSON is read inside queries through `json_text`, `json_type` and `json_values`, whose paths
are this package's constants (never request input).

A dialect also owns the connection: it opens and closes it, hands out `Session`s for reads
(autocommit) and writes (one transaction), converts timestamps, and knows the database's
error classes and migration statements.

`Dialect.batch` joins several storage calls into one transaction: inside it, every `read` and
`write` of the same task on the same dialect reuses the batch's session instead of opening
its own (a run's start and end are each one commit, not three). A batch must not catch a
storage error and go on (Postgres aborts the whole transaction at the first failed
statement): an error inside it rolls all of it back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, ClassVar, Protocol

from foldwise.gateway.storage._errors import GatewayStorageError
from foldwise.gateway.storage._migrations import Migration

__all__ = ["Dialect", "Row", "Session", "not_open"]

Row = Sequence[Any]


class Session(Protocol):
    """One connection (inside a transaction for writes) with ``?``-placeholder queries."""

    async def fetchone(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """Run `query` and return its first row, or `None`."""
        ...

    async def fetchall(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run `query` and return every row."""
        ...

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run `query`; return the number of rows it changed."""
        ...

    async def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `query` once per parameter row."""
        ...


def not_open(operation: str, thread_id: str | None) -> GatewayStorageError:
    """The error for an operation on a storage that was never set up, or is closed."""
    return GatewayStorageError(
        "storage is not open; await setup() (or use `async with`) first",
        operation=operation,
        thread_id=thread_id,
    )


_BATCH: ContextVar[tuple[Dialect, asyncio.Task[Any] | None, Session] | None] = ContextVar(
    "foldwise_storage_batch", default=None
)
"""The open batch: its dialect, the task that opened it, and its session."""


def _task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # pragma: no cover - storage is only used on an event loop
        return None


class Dialect:
    """Base of the per-database parts; subclasses set the attributes and the hooks."""

    backend: ClassVar[str] = ""
    prefix: str = ""
    json_param: ClassVar[str] = "?"
    now: ClassVar[str] = ""
    later: ClassVar[str] = ""
    key_share_lock: ClassVar[str] = ""
    share_lock: ClassVar[str] = ""
    exclusive_lock: ClassVar[str] = ""
    lower: ClassVar[str] = "LOWER"
    json_string: ClassVar[str] = ""
    """What `json_type` answers for a JSON string."""
    json_array: ClassVar[str] = "array"
    """What `json_type` answers for a JSON array."""

    def sql(self, template: str) -> str:
        """Fill the dialect slots of a query template (see the module docstring)."""
        return template.format(
            p=self.prefix,
            json=self.json_param,
            now=self.now,
            later=self.later,
            keyshare=self.key_share_lock,
            share=self.share_lock,
            exclusive=self.exclusive_lock,
            lower=self.lower,
        )

    def native(self, query: str) -> str:
        """`query` with the driver's own placeholders (for SQL run outside a `Session`)."""
        return query

    # connection ------------------------------------------------------------------------------

    async def open(self) -> None:  # pragma: no cover - overridden
        """Connect (once); a second call is a no-op."""
        raise NotImplementedError

    async def close(self) -> None:  # pragma: no cover - overridden
        """Disconnect; safe to call twice."""
        raise NotImplementedError

    def read(
        self, operation: str, thread_id: str | None
    ) -> AbstractAsyncContextManager[Session]:  # pragma: no cover - overridden
        """A session without a transaction; database errors become `GatewayStorageError`."""
        raise NotImplementedError

    def write(
        self, operation: str, thread_id: str | None
    ) -> AbstractAsyncContextManager[Session]:  # pragma: no cover - overridden
        """A session inside one transaction, committed on exit, rolled back on an error."""
        raise NotImplementedError

    def joined(self) -> Session | None:
        """The session of the batch this task opened on this dialect, if any.

        Tasks started inside a batch inherit the context variable but not the batch: only the
        task that opened it joins it.
        """
        held = _BATCH.get()
        if held is None or held[0] is not self or held[1] is not _task():
            return None
        return held[2]

    @asynccontextmanager
    async def batch(self, operation: str, thread_id: str | None) -> AsyncIterator[Session]:
        """One write transaction that this task's storage calls join until it ends."""
        joined = self.joined()
        if joined is not None:  # already in one: nested batches are the outer one
            yield joined
            return
        async with self.write(operation, thread_id) as session:
            token = _BATCH.set((self, _task(), session))
            try:
                yield session
            finally:
                _BATCH.reset(token)

    # values ----------------------------------------------------------------------------------

    def to_time(self, moment: datetime) -> Any:  # pragma: no cover - overridden
        """Bind a datetime as the database stores row times."""
        raise NotImplementedError

    def from_time(self, value: Any) -> datetime:  # pragma: no cover - overridden
        """Read a row time as a timezone-aware UTC datetime."""
        raise NotImplementedError

    def from_lease_time(self, value: Any) -> datetime:  # pragma: no cover - overridden
        """Read a lease time (``{now}``-based) as a timezone-aware UTC datetime."""
        raise NotImplementedError

    def json_contains(self, column: str) -> str:  # pragma: no cover - overridden
        """A condition: `column` contains the JSON text bound to its one ``?``."""
        raise NotImplementedError

    def json_text(self, column: str, *path: str | int) -> str:  # pragma: no cover - overridden
        """An expression: the JSON value at `path` of `column` (strings unquoted), or NULL."""
        raise NotImplementedError

    def json_type(self, column: str, *path: str | int) -> str:  # pragma: no cover - overridden
        """An expression: the JSON type at `path` of `column` (`json_string`, `json_array`...)."""
        raise NotImplementedError

    def json_values(self, column: str) -> str:  # pragma: no cover - overridden
        """A table expression: one row per top-level value of the object in `column`.

        Its one column of interest is `value` (the value as text).
        """
        raise NotImplementedError

    # migrations ------------------------------------------------------------------------------

    def setup_statements(
        self,
    ) -> Sequence[tuple[str, Sequence[Any]]]:  # pragma: no cover - overridden
        """Run first in the migration transaction: serialize setups, create the ledger."""
        raise NotImplementedError

    def migration_statements(self, migration: Migration) -> Sequence[str]:
        """One migration's statements for this database."""
        raise NotImplementedError  # pragma: no cover - overridden
