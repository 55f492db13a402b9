"""The crash campaign's direct database reads and writes (SQLite file or PostgreSQL schema).

- `stale_leases`: thread leases taken before the kill that still run past the kill plus the TTL
  (I5, read right after the restart);
- `expire_memory_claims`: the dead server's memory-queue claims, expired as the 60 s of their
  lease would (the queue keeps a user's updates in order, so an unexpired claim holds the rest);
- `drop_schema`: the PostgreSQL row's scratch schema, dropped at the end.
"""

from __future__ import annotations

import contextlib
import sqlite3

__all__ = ["drop_schema", "expire_memory_claims", "stale_leases"]

_EPOCH_TEXT = "1970-01-01T00:00:00.000000+00:00"


def _sqlite_path(storage_url: str) -> str | None:
    return storage_url.removeprefix("sqlite:///") if storage_url.startswith("sqlite:///") else None


def stale_leases(storage_url: str, killed: float, ttl: float) -> list[str]:
    """SQLite: leases acquired before `killed` that expire later than `killed + ttl + 1`."""
    path = _sqlite_path(storage_url)
    if path is None:
        return []  # PostgreSQL: the new run's wait measures it (`check_threads`)
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as conn:
        rows = conn.execute(
            "SELECT thread_id, holder, expires_at FROM thread_locks WHERE acquired_at < ?",
            (killed,),
        ).fetchall()
    limit = killed + ttl + 1.0
    return [
        f"lease of {holder} on {thread} until {float(until):.1f} > {limit:.1f}"
        for thread, holder, until in rows
        if float(until) > limit
    ]


def expire_memory_claims(storage_url: str) -> None:
    """Expire every `claimed` row of the memory queue (call while no server runs)."""
    path = _sqlite_path(storage_url)
    if path is not None:
        with contextlib.closing(sqlite3.connect(path, timeout=10)) as conn, conn:
            conn.execute(
                "UPDATE memory_outbox SET lease_until = ? WHERE status = 'claimed'",
                (_EPOCH_TEXT,),
            )
        return
    import psycopg
    from psycopg import sql

    dsn, _, schema = storage_url.partition("?schema=")
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(
            sql.SQL(
                "UPDATE {}.memory_outbox SET lease_until = now() - interval '1 day' "
                "WHERE status = 'claimed'"
            ).format(sql.Identifier(schema))
        )


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a PostgreSQL schema and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
