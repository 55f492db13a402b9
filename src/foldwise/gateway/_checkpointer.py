"""Open LangGraph's checkpointer for `storage.url`, with safe deserialization.

- ``sqlite:///path`` (and ``memory://``): `FencedSqliteSaver` (LangGraph's `SqliteSaver` driven
  from the event loop, `foldwise.gateway._checkpointer_sqlite`) on its own connection to the
  same file as the gateway tables, in WAL mode with a busy timeout.
- ``postgresql://...``: `AsyncPostgresSaver` on a connection pool. With ``?schema=name`` its
  tables live in that schema (the gateway tables' schema), otherwise in the connection's
  default schema. Concurrent worker start-ups serialize their `setup()` on an advisory lock
  (polled, so the waiters cannot deadlock LangGraph's concurrent indexing).

Checkpoints are read with LangGraph's strict msgpack mode (the `LANGGRAPH_STRICT_MSGPACK`
behaviour, whatever the environment says): only LangGraph's built-in allowlist of safe types
(messages, datetimes, LangGraph's own types) is ever reconstructed, so a tampered checkpoint
row cannot make the gateway import and call arbitrary code.

Writes are fenced by thread leases (`foldwise.gateway._leases`). When the config of a write
(`aput`, `aput_writes`) carries a `Lease`, the write commits only if the lease row still names
that holder and fencing token and has not expired, checked in the same transaction:

- SQLite file: the check and the write run in one ``BEGIN IMMEDIATE`` transaction on the
  checkpointer's connection (`FencedSqliteSaver.transaction`); the lease row is in the same
  file, and SQLite's single writer lock keeps any takeover out until the commit.
- Postgres: the check (``SELECT ... FOR SHARE`` on the lease row, which blocks a takeover's
  update until commit) and the write run in one transaction on one pooled connection
  (`FencedWrites`).
- ``memory://``: the checkpointer's database is not the gateway tables' database, so the
  check goes through the gateway storage right before the write, under the checkpointer's
  lock (no other checkpoint write can interleave, but the check is not in the write's
  transaction). ``memory://`` is single-process and meant for tests.

A lost lease raises `LeaseLostError` (409) and writes nothing.

On both backends a run's task writes (`aput_writes` under a lease) are held in memory and
committed in the transaction of the step's checkpoint: one transaction (one lease check, one
commit) per step (`foldwise.gateway._held_writes`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from foldwise._crash import crash_point
from foldwise.gateway._checkpointer_sqlite import FencedSqliteSaver
from foldwise.gateway._decode_cache import OnceDecodedSerializer
from foldwise.gateway._errors import LeaseLostError
from foldwise.gateway._held_writes import HeldWrites
from foldwise.gateway._leases import Lease, lease_of
from foldwise.gateway.storage import SqlGatewayStorage, open_storage
from foldwise.gateway.storage._sqlite_conn import LoopConnection

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "LOCK_WAIT_SECONDS",
    "FencedSqliteSaver",
    "FencedWrites",
    "open_checkpointer",
    "postgres_pool",
    "postgres_target",
    "safe_serializer",
    "setup_serialized",
    "sqlite_path",
]

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_BUSY_TIMEOUT_MS = 5000
LOCK_WAIT_SECONDS = 120.0
"""How long a worker waits for another's Postgres set-up (migrations) before failing."""

_WritesCall = tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]
"""Held task writes on Postgres: the `aput_writes` arguments (config, writes, task, path)."""


def safe_serializer() -> JsonPlusSerializer:
    """A serializer that reconstructs only LangGraph's allowlisted safe types.

    A large blob read twice in a row (a run's head checkpoint: the gateway's check, then
    LangGraph's loop) is decoded once (`OnceDecodedSerializer`).
    """
    return OnceDecodedSerializer(allowed_msgpack_modules=None)


def sqlite_path(url: str) -> str:
    if url.startswith("memory:"):
        return ":memory:"
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if path == ":memory:":
        return path
    resolved = Path(os.path.expanduser(path))
    resolved.parent.mkdir(parents=True, exist_ok=True)
    return str(resolved)


def postgres_target(url: str) -> tuple[str, str | None]:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), None)
    rest = [(key, value) for key, value in query if key != "schema"]
    scheme = parts.scheme.split("+", 1)[0]
    if scheme == "postgres":
        scheme = "postgresql"
    if schema is not None and not _SCHEMA.fullmatch(schema):
        raise ValueError("storage.url: ?schema= must be a plain SQL identifier")
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), schema


class FencedWrites(BaseCheckpointSaver[str]):
    """Mixin: writes under a `Lease` run inside `_fenced`, or not at all; one per step.

    `_fenced(lease)` opens the write's transaction, checks the lease in it (raising
    `LeaseLostError` when it is lost) and yields a stock saver bound to that transaction.
    Task writes under a lease (`aput_writes` of a run's step) are held (`held_writes`, the
    contract is `foldwise.gateway._held_writes`) and replayed on that saver in the transaction
    of the step's checkpoint, before it; reads of a thread commit its held writes first
    (`HeldWrites.settle`), and `HeldWrites.flush` commits those no checkpoint took along.
    Writes without a lease go to the stock saver unchanged.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held_writes: HeldWrites[_WritesCall] = HeldWrites(self._commit_writes)
        """A run's task writes, held until its step's checkpoint, a read or a flush."""

    def _fenced(
        self, lease: Lease
    ) -> AbstractAsyncContextManager[BaseCheckpointSaver[str]]:  # pragma: no cover
        raise NotImplementedError

    # reads: the thread's held writes first -----------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """A checkpoint tuple, the thread's held writes committed first."""
        await self.held_writes.settle(str(config["configurable"]["thread_id"]))
        return await super().aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoint tuples, newest first, the held writes of the listed thread(s) first."""
        await self.held_writes.settle_listed(config)
        async for item in super().alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        """LangGraph's delta-channel history read, the thread's held writes committed first."""
        await self.held_writes.settle(str(config["configurable"]["thread_id"]))
        return await super().aget_delta_channel_history(config=config, channels=channels)

    # writes ------------------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint; under a lost lease raise `LeaseLostError` and save nothing."""
        lease = lease_of(config)
        thread_id = str(config["configurable"]["thread_id"])
        held = await self.held_writes.take(thread_id, lease)
        if lease is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        crash_point("checkpoint.before")  # tests only
        try:
            async with self._fenced(lease) as writer:
                for _, call in held:  # the step's task writes: same transaction
                    await writer.aput_writes(*call)
                saved = await writer.aput(config, checkpoint, metadata, new_versions)
        except LeaseLostError:
            raise
        except BaseException:
            self.held_writes.keep(thread_id, held)  # rolled back: the run's end commits them
            raise
        crash_point("checkpoint.after")  # tests only
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save pending writes; under a lease, hold them for the step's checkpoint."""
        lease = lease_of(config)
        if lease is None:
            await super().aput_writes(config, writes, task_id, task_path)
            return
        thread_id = str(config["configurable"]["thread_id"])
        self.held_writes.hold(thread_id, lease, (config, writes, task_id, task_path))

    async def _commit_writes(self, lease: Lease, held: list[_WritesCall]) -> None:
        """Commit held task writes on their own, in one transaction under `lease`."""
        async with self._fenced(lease) as writer:
            for call in held:
                await writer.aput_writes(*call)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes (held ones too)."""
        self.held_writes.drop(str(thread_id))
        await super().adelete_thread(thread_id)


async def _advisory_lock(conn: Any, key: str) -> None:
    """Take the session advisory lock `key` on `conn` by polling, holding no snapshot meanwhile.

    LangGraph's Postgres migrations (checkpointer and store) run ``CREATE INDEX CONCURRENTLY``,
    which waits for every transaction with a snapshot, including another worker blocked in
    ``pg_advisory_lock``: a blocking wait would deadlock the two workers starting together.

    Raises:
        TimeoutError: The lock stayed taken for `LOCK_WAIT_SECONDS`.
    """
    deadline = asyncio.get_running_loop().time() + LOCK_WAIT_SECONDS
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(hashtext(%s)) AS held", (key,))
        row = await cursor.fetchone()
        if row is not None and row[0]:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"another worker held the set-up lock {key!r} {LOCK_WAIT_SECONDS} s")
        await asyncio.sleep(0.05)


def _lease_check_sql(url: str) -> str:
    storage = open_storage(url)  # not connected: only its dialect's SQL is read
    assert isinstance(storage, SqlGatewayStorage)
    return storage.lease_check_sql()


@asynccontextmanager
async def _sqlite_saver(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    path = sqlite_path(url)
    conn = LoopConnection(path)
    await conn.open()
    try:
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        lease_sql = None if path == ":memory:" else _lease_check_sql(url)
        saver = FencedSqliteSaver(conn, serde=safe_serializer(), lease_sql=lease_sql)
        await saver.asetup()
        yield saver
    finally:
        await conn.close()


@asynccontextmanager
async def postgres_pool(url: str, *, max_size: int) -> AsyncIterator[AsyncConnectionPool[Any]]:
    """An open pool for `url` (autocommit, dict rows, the ``?schema=`` as search path)."""
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from foldwise._pg_check import check_async_connection

    dsn, schema = postgres_target(url)
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if schema is not None:
        kwargs["options"] = f"-c search_path={schema}"
    # `check`: a connection a database restart closed is replaced when taken, not handed out
    # (an empty query only when its socket is not quiet: `foldwise._pg_check`).
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn,
        kwargs=kwargs,
        min_size=1,
        max_size=max_size,
        open=False,
        timeout=10,
        check=check_async_connection,
    )
    await pool.open(wait=True, timeout=10)
    try:
        yield pool
    finally:
        await pool.close()


async def setup_serialized(url: str, name: str, setup: Callable[[], Awaitable[None]]) -> None:
    """Create the ``?schema=`` if needed and run `setup` under the advisory lock `name`.

    Workers starting together on one database run their migrations one at a time.
    """
    from psycopg import AsyncConnection, sql

    dsn, schema = postgres_target(url)
    key = f"foldwise:{name}-setup:{schema or ''}"
    async with await AsyncConnection.connect(dsn, autocommit=True) as lock_conn:
        # Locked first: concurrent CREATE SCHEMA IF NOT EXISTS can still collide.
        await _advisory_lock(lock_conn, key)
        try:
            if schema is not None:
                await lock_conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            await setup()
        finally:
            await lock_conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


@asynccontextmanager
async def _postgres_saver(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from foldwise.gateway._checkpointer_pg import FencedPostgresSaver

    async with postgres_pool(url, max_size=10) as pool:
        saver = FencedPostgresSaver(pool, serde=safe_serializer(), lease_sql=_lease_check_sql(url))
        await setup_serialized(url, "checkpointer", saver.setup)
        yield saver


@asynccontextmanager
async def open_checkpointer(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open (and set up) the LangGraph checkpointer for a storage URL; close it on exit.

    Args:
        url: `storage.url`: ``sqlite:///path``, ``memory://`` or ``postgresql://...``.

    Yields:
        A `FencedSqliteSaver` or `FencedPostgresSaver`: writes under a lease are fenced.

    Raises:
        ValueError: An unsupported URL.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("sqlite", "memory"):
        async with _sqlite_saver(url) as saver:
            yield saver
    elif scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        async with _postgres_saver(url) as saver:
            yield saver
    else:
        raise ValueError(f"unsupported storage URL scheme {scheme!r}")
