"""Open LangGraph's checkpointer for `storage.url`, with safe deserialization.

- ``sqlite:///path`` (and ``memory://``): `AsyncSqliteSaver` on its own connection to the same
  file as the gateway tables, in WAL mode with a busy timeout.
- ``postgresql://...``: `AsyncPostgresSaver` on a connection pool. With ``?schema=name`` its
  tables live in that schema (the gateway tables' schema), otherwise in the connection's
  default schema. Concurrent worker start-ups serialize their `setup()` on an advisory lock.

Checkpoints are read with LangGraph's strict msgpack mode (the `LANGGRAPH_STRICT_MSGPACK`
behaviour, whatever the environment says): only LangGraph's built-in allowlist of safe types
(messages, datetimes, LangGraph's own types) is ever reconstructed, so a tampered checkpoint
row cannot make the gateway import and call arbitrary code.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["open_checkpointer", "safe_serializer"]

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_BUSY_TIMEOUT_MS = 5000


def safe_serializer() -> JsonPlusSerializer:
    """A serializer that reconstructs only LangGraph's allowlisted safe types."""
    return JsonPlusSerializer(allowed_msgpack_modules=None)


def _sqlite_path(url: str) -> str:
    if url.startswith("memory:"):
        return ":memory:"
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if path == ":memory:":
        return path
    resolved = Path(os.path.expanduser(path))
    resolved.parent.mkdir(parents=True, exist_ok=True)
    return str(resolved)


def _postgres_target(url: str) -> tuple[str, str | None]:
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


@asynccontextmanager
async def _sqlite_saver(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(_sqlite_path(url))
    try:
        await conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        saver = AsyncSqliteSaver(conn, serde=safe_serializer())
        await saver.setup()
        yield saver
    finally:
        await conn.close()


@asynccontextmanager
async def _postgres_saver(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection, sql
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    dsn, schema = _postgres_target(url)
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if schema is not None:
        kwargs["options"] = f"-c search_path={schema}"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, kwargs=kwargs, min_size=1, max_size=10, open=False, timeout=10
    )
    await pool.open(wait=True, timeout=10)
    try:
        saver = AsyncPostgresSaver(pool, serde=safe_serializer())
        key = f"foldwise:checkpointer-setup:{schema or ''}"
        async with await AsyncConnection.connect(dsn, autocommit=True) as lock_conn:
            if schema is not None:
                await lock_conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            await lock_conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
            try:
                await saver.setup()
            finally:
                await lock_conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
        yield saver
    finally:
        await pool.close()


@asynccontextmanager
async def open_checkpointer(url: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open (and set up) the LangGraph checkpointer for a storage URL; close it on exit.

    Args:
        url: `storage.url`: ``sqlite:///path``, ``memory://`` or ``postgresql://...``.

    Yields:
        An `AsyncSqliteSaver` or `AsyncPostgresSaver`.

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
