"""Numbered schema migrations for both backends.

A migration is applied once per database (SQLite file or Postgres schema) and recorded in
`schema_migrations`. Never edit a released migration: append a new one with the next number.
Postgres statements name tables as ``{schema}.table``; the backend substitutes the quoted
schema identifier. Statements must not contain ``?`` (Postgres placeholders are rewritten).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MIGRATIONS", "Migration", "check_not_newer", "pending_migrations"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema change.

    Attributes:
        version: Its number, starting at 1, without gaps.
        name: A short description, stored next to the number.
        sqlite: Statements for SQLite.
        postgres: Statements for Postgres (``{schema}`` is the quoted schema).
    """

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


_SQLITE_0001 = (
    """CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        metadata TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('idle', 'busy', 'error'))
    )""",
    "CREATE INDEX threads_created_idx ON threads (created_at DESC, thread_id DESC)",
    "CREATE INDEX threads_updated_idx ON threads (updated_at DESC, thread_id DESC)",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        assistant_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('run', 'compact')),
        status TEXT NOT NULL CHECK (status IN ('running', 'success', 'error', 'interrupted')),
        error TEXT,
        metadata TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX runs_thread_idx ON runs (thread_id, created_at DESC)",
    """CREATE TABLE transcript_events (
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'compaction')),
        run_id TEXT,
        message_id TEXT,
        message TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
    """CREATE UNIQUE INDEX transcript_message_id_idx ON transcript_events (thread_id, message_id)
        WHERE message_id IS NOT NULL""",
    """CREATE TABLE receipts (
        receipt_id INTEGER PRIMARY KEY AUTOINCREMENT,
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        run_id TEXT,
        receipt TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX receipts_thread_idx ON receipts (thread_id, receipt_id)",
    """CREATE TABLE thread_locks (
        thread_id TEXT PRIMARY KEY REFERENCES threads (thread_id) ON DELETE CASCADE,
        holder TEXT NOT NULL,
        kind TEXT NOT NULL,
        acquired_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
)

_POSTGRES_0001 = (
    """CREATE TABLE {schema}.threads (
        thread_id TEXT PRIMARY KEY,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        metadata JSONB NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('idle', 'busy', 'error'))
    )""",
    "CREATE INDEX threads_created_idx ON {schema}.threads (created_at DESC, thread_id DESC)",
    "CREATE INDEX threads_updated_idx ON {schema}.threads (updated_at DESC, thread_id DESC)",
    "CREATE INDEX threads_metadata_idx ON {schema}.threads USING GIN (metadata jsonb_path_ops)",
    """CREATE TABLE {schema}.runs (
        run_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES {schema}.threads (thread_id) ON DELETE CASCADE,
        assistant_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('run', 'compact')),
        status TEXT NOT NULL CHECK (status IN ('running', 'success', 'error', 'interrupted')),
        error TEXT,
        metadata JSONB NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL
    )""",
    "CREATE INDEX runs_thread_idx ON {schema}.runs (thread_id, created_at DESC)",
    """CREATE TABLE {schema}.transcript_events (
        thread_id TEXT NOT NULL REFERENCES {schema}.threads (thread_id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'compaction')),
        run_id TEXT,
        message_id TEXT,
        message JSONB NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
    """CREATE UNIQUE INDEX transcript_message_id_idx
        ON {schema}.transcript_events (thread_id, message_id) WHERE message_id IS NOT NULL""",
    """CREATE TABLE {schema}.receipts (
        receipt_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES {schema}.threads (thread_id) ON DELETE CASCADE,
        run_id TEXT,
        receipt JSONB NOT NULL,
        created_at TIMESTAMPTZ NOT NULL
    )""",
    "CREATE INDEX receipts_thread_idx ON {schema}.receipts (thread_id, receipt_id)",
    """CREATE TABLE {schema}.thread_locks (
        thread_id TEXT PRIMARY KEY REFERENCES {schema}.threads (thread_id) ON DELETE CASCADE,
        holder TEXT NOT NULL,
        kind TEXT NOT NULL,
        acquired_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    )""",
)

_SQLITE_0002 = (
    "ALTER TABLE receipts ADD COLUMN receipt_key TEXT",
    """CREATE UNIQUE INDEX receipts_key_idx ON receipts (thread_id, receipt_key)
        WHERE receipt_key IS NOT NULL""",
)

_POSTGRES_0002 = (
    "ALTER TABLE {schema}.receipts ADD COLUMN receipt_key TEXT",
    """CREATE UNIQUE INDEX receipts_key_idx ON {schema}.receipts (thread_id, receipt_key)
        WHERE receipt_key IS NOT NULL""",
)

# Lease fencing: every acquisition of a thread's lease counts the token up by one; released
# leases keep their row (expired, without a holder) so the count survives them.
_SQLITE_0003 = ("ALTER TABLE thread_locks ADD COLUMN token INTEGER NOT NULL DEFAULT 0",)

_POSTGRES_0003 = ("ALTER TABLE {schema}.thread_locks ADD COLUMN token BIGINT NOT NULL DEFAULT 0",)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "threads, runs, transcript, receipts, thread locks", _SQLITE_0001, _POSTGRES_0001),
    Migration(2, "receipts are unique per thread by their own id", _SQLITE_0002, _POSTGRES_0002),
    Migration(3, "thread leases carry a fencing token", _SQLITE_0003, _POSTGRES_0003),
)
"""Every migration, in order."""


def pending_migrations(applied: Iterable[int]) -> list[Migration]:
    """Return the migrations not yet in `applied`, in order."""
    done = set(applied)
    return [m for m in MIGRATIONS if m.version not in done]


def check_not_newer(applied: Iterable[int]) -> str | None:
    """Return an error message when the database has migrations this code does not know."""
    known = {m.version for m in MIGRATIONS}
    unknown = sorted(set(applied) - known)
    if unknown:
        return (
            f"the database has schema migrations {unknown} that this foldwise version does not "
            f"know (it knows 1..{max(known)}); upgrade foldwise before serving this database"
        )
    return None
