"""`open_backend(url)`: the memory backend a ``memory.url`` (or a LangGraph store) names."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from foldwise.errors import ConfigError
from foldwise.memory._sql_backend import SqlMemoryBackend
from foldwise.memory._sql_sqlite import SqliteDialect
from foldwise.memory._store_backend import StoreMemoryBackend

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from foldwise.memory._contracts import MemoryBackend

__all__ = ["open_backend"]

_KEY = "memory.url"
_POSTGRES = ("postgresql", "postgres", "postgresql+psycopg", "postgres+psycopg")


def _sqlite(url: str) -> SqlMemoryBackend:
    rest = url[len("sqlite:") :]
    path = rest[3:].split("?", 1)[0] if rest.startswith("///") else ""
    if not path:
        raise ConfigError(
            "a SQLite URL looks like sqlite:///relative/path.db or sqlite:////absolute/path.db",
            key=_KEY,
        )
    return SqlMemoryBackend(SqliteDialect(path if path == ":memory:" else os.path.expanduser(path)))


def _postgres(url: str) -> SqlMemoryBackend:
    try:
        from foldwise.memory._sql_postgres import DEFAULT_SCHEMA, PostgresDialect, check_schema
    except ImportError as exc:  # pragma: no cover - psycopg is installed in the test env
        raise ConfigError(
            "a postgresql:// URL needs psycopg: pip install 'foldwise[postgres]'", key=_KEY
        ) from exc
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for name, value in query if name == "schema"), DEFAULT_SCHEMA)
    rest = urlencode([(name, value) for name, value in query if name != "schema"])
    dsn = urlunsplit((parts.scheme.split("+", 1)[0], parts.netloc, parts.path, rest, ""))
    try:
        check_schema(schema)
    except ValueError as exc:
        raise ConfigError(str(exc), key=_KEY) from exc
    return SqlMemoryBackend(PostgresDialect(dsn, schema=schema))


def open_backend(url: str | None, *, store: BaseStore | None = None) -> MemoryBackend:
    """The memory backend `url` names (not yet set up: call `setup` or `asetup`).

    Supported:

    - ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite:///:memory:``:
      `SqlMemoryBackend` over SQLite (the gateway's database file is the default);
    - ``postgresql://...`` / ``postgres://...`` (``?schema=name``, default ``foldwise``):
      `SqlMemoryBackend` over PostgreSQL (needs the ``postgres`` extra);
    - ``memory://``: `StoreMemoryBackend` over a fresh `InMemoryStore` (tests, demos);
    - `store` given: `StoreMemoryBackend` over that LangGraph store (`url` is ignored).

    Args:
        url: The ``memory.url`` setting.
        store: A LangGraph `BaseStore` to keep the facts in instead.

    Raises:
        ConfigError: The URL is not one of the forms above (names ``memory.url``; the URL
            itself is not echoed, it may carry a password).
    """
    if store is not None:
        return StoreMemoryBackend(store)
    if not isinstance(url, str) or ":" not in url:
        raise ConfigError(
            "must be a URL: sqlite:///path.db, postgresql://user@host/db or memory://", key=_KEY
        )
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return StoreMemoryBackend()
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in _POSTGRES:
        return _postgres(url)
    raise ConfigError(
        f"unsupported scheme {scheme!r}: use sqlite:///path.db, postgresql://user@host/db "
        "or memory://",
        key=_KEY,
    )
