"""`open_storage(url)`: pick the backend from a storage URL."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from foldwise.gateway.storage._sqlite import SqliteGatewayStorage

if TYPE_CHECKING:
    from foldwise.gateway.storage._sql import GatewayStorage

__all__ = ["open_storage"]

_POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgres+psycopg")


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower() if ":" in url else ""


def _sqlite_path(url: str) -> str:
    rest = url[len("sqlite:") :]
    if not rest.startswith("///"):
        raise ValueError(
            "a SQLite storage URL looks like sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    path = rest[3:].split("?", 1)[0]
    if not path:
        raise ValueError("the SQLite storage URL has no file path (sqlite:///path/to/file.db)")
    if path == ":memory:":
        return path
    return os.path.expanduser(path)


def _postgres_dsn(url: str) -> tuple[str, str | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), None)
    rest = [(key, value) for key, value in query if key != "schema"]
    dsn = urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment))
    return dsn, schema


def open_storage(url: str, **options: Any) -> GatewayStorage:
    """Create the storage backend a URL names (not yet connected).

    Call ``await storage.setup()`` (or use ``async with``) before use, and `aclose` after.

    Supported URLs:

    - ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` (parent directories are
      created by `setup`); ``sqlite:///:memory:``;
    - ``memory://``: a private in-memory SQLite database (tests);
    - ``postgresql://...`` or ``postgres://...`` (also ``postgresql+psycopg://``); an optional
      ``?schema=name`` query parameter picks the schema (default ``foldwise``).

    Args:
        url: The storage URL, e.g. `storage.url` from `foldwise.yaml`.
        **options: Keyword options for the backend class (`busy_timeout_ms`, `synchronous`
            for SQLite; `schema`, `min_size`, `max_size`, `connect_timeout` for Postgres).

    Returns:
        A `SqliteGatewayStorage` or `PostgresGatewayStorage`.

    Raises:
        ValueError: The URL is not one of the forms above.
        ImportError: A Postgres URL without psycopg installed (``pip install
            'foldwise[postgres]'``).
    """
    if not isinstance(url, str):
        raise ValueError("the storage URL must be a string")
    scheme = _scheme(url)
    if scheme == "memory":
        return SqliteGatewayStorage(":memory:", **options)
    if scheme == "sqlite":
        return SqliteGatewayStorage(_sqlite_path(url), **options)
    if scheme in _POSTGRES_SCHEMES:
        try:
            from foldwise.gateway.storage._postgres import PostgresGatewayStorage
        except ImportError as exc:  # pragma: no cover - psycopg is installed in the test env
            raise ImportError(
                "a postgresql:// storage URL needs psycopg: pip install 'foldwise[postgres]'"
            ) from exc
        dsn, schema = _postgres_dsn(url)
        if schema is not None:
            options.setdefault("schema", schema)
        return PostgresGatewayStorage(dsn, **options)
    # Never echo the URL itself: it may carry a password.
    raise ValueError(
        f"unsupported storage URL scheme {scheme!r}: use sqlite:///path.db, memory:// or "
        "postgresql://user@host/db"
    )
