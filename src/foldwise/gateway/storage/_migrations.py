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


# Each statement is written once; `_render` fills in each database's names and types:
# {t} the table prefix (Postgres: the schema), {time} a timestamp, {json} a JSON object,
# {bigint} a 64-bit integer, {serial} an auto-increment key, {lease_time} a lease time.
_TYPES = {
    "sqlite": {
        "t": "",
        "time": "TEXT",
        "json": "TEXT",
        "bigint": "INTEGER",
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "lease_time": "REAL",
    },
    "postgres": {
        "t": "{schema}.",
        "time": "TIMESTAMPTZ",
        "json": "JSONB",
        "bigint": "BIGINT",
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "lease_time": "TIMESTAMPTZ",
    },
}


def _migration(
    version: int, name: str, statements: tuple[str, ...], postgres_only: tuple[str, ...] = ()
) -> Migration:
    sqlite, postgres = (tuple(s.format(**_TYPES[db]) for s in statements) for db in _TYPES)
    return Migration(version, name, sqlite, postgres + postgres_only)


_0001 = (
    """CREATE TABLE {t}threads (
        thread_id TEXT PRIMARY KEY,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        metadata {json} NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('idle', 'busy', 'error'))
    )""",
    "CREATE INDEX threads_created_idx ON {t}threads (created_at DESC, thread_id DESC)",
    "CREATE INDEX threads_updated_idx ON {t}threads (updated_at DESC, thread_id DESC)",
    """CREATE TABLE {t}runs (
        run_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES {t}threads (thread_id) ON DELETE CASCADE,
        assistant_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('run', 'compact')),
        status TEXT NOT NULL CHECK (status IN ('running', 'success', 'error', 'interrupted')),
        error TEXT,
        metadata {json} NOT NULL,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL
    )""",
    "CREATE INDEX runs_thread_idx ON {t}runs (thread_id, created_at DESC)",
    """CREATE TABLE {t}transcript_events (
        thread_id TEXT NOT NULL REFERENCES {t}threads (thread_id) ON DELETE CASCADE,
        seq {bigint} NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'compaction')),
        run_id TEXT,
        message_id TEXT,
        message {json} NOT NULL,
        created_at {time} NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
    """CREATE UNIQUE INDEX transcript_message_id_idx
        ON {t}transcript_events (thread_id, message_id) WHERE message_id IS NOT NULL""",
    """CREATE TABLE {t}receipts (
        receipt_id {serial},
        thread_id TEXT NOT NULL REFERENCES {t}threads (thread_id) ON DELETE CASCADE,
        run_id TEXT,
        receipt {json} NOT NULL,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX receipts_thread_idx ON {t}receipts (thread_id, receipt_id)",
    """CREATE TABLE {t}thread_locks (
        thread_id TEXT PRIMARY KEY REFERENCES {t}threads (thread_id) ON DELETE CASCADE,
        holder TEXT NOT NULL,
        kind TEXT NOT NULL,
        acquired_at {lease_time} NOT NULL,
        expires_at {lease_time} NOT NULL
    )""",
)
_0001_POSTGRES_ONLY = (
    "CREATE INDEX threads_metadata_idx ON {schema}.threads USING GIN (metadata jsonb_path_ops)",
)

_0002 = (
    "ALTER TABLE {t}receipts ADD COLUMN receipt_key TEXT",
    """CREATE UNIQUE INDEX receipts_key_idx ON {t}receipts (thread_id, receipt_key)
        WHERE receipt_key IS NOT NULL""",
)

# Lease fencing: every acquisition of a thread's lease counts the token up by one; released
# leases keep their row (expired, without a holder) so the count survives them.
_0003 = ("ALTER TABLE {t}thread_locks ADD COLUMN token {bigint} NOT NULL DEFAULT 0",)

# Tenant isolation: the identity that created a thread owns it; threads made before auth
# existed belong to the local identity (""), the one every request has without auth.
_0004 = (
    "ALTER TABLE {t}threads ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX threads_owner_created_idx ON {t}threads (owner, created_at DESC, thread_id DESC)",
)

# The durable run queue: a run accepted while its thread is busy waits `pending`, its request
# in `run_queue`, until a worker claims it. SQLite cannot alter a CHECK constraint: the runs
# table is rebuilt (nothing references it).
_RUNS_0005 = """CREATE TABLE {t}runs{suffix} (
        run_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES {t}threads (thread_id) ON DELETE CASCADE,
        assistant_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('run', 'compact')),
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'running', 'success', 'error', 'interrupted')),
        error TEXT,
        metadata {json} NOT NULL,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL
    )"""
_0005_COMMON = (
    "CREATE INDEX runs_pending_idx ON {t}runs (created_at, run_id) WHERE status = 'pending'",
    """CREATE TABLE {t}run_queue (
        run_id TEXT PRIMARY KEY REFERENCES {t}runs (run_id) ON DELETE CASCADE,
        request {json} NOT NULL
    )""",
)
_0005 = Migration(
    5,
    "runs may wait pending in a durable queue",
    (
        _RUNS_0005.format(suffix="_new", **_TYPES["sqlite"]),
        "INSERT INTO runs_new SELECT * FROM runs",
        "DROP TABLE runs",
        "ALTER TABLE runs_new RENAME TO runs",
        "CREATE INDEX runs_thread_idx ON runs (thread_id, created_at DESC)",
        *(s.format(**_TYPES["sqlite"]) for s in _0005_COMMON),
    ),
    (
        "ALTER TABLE {schema}.runs DROP CONSTRAINT runs_status_check",
        "ALTER TABLE {schema}.runs ADD CONSTRAINT runs_status_check "
        "CHECK (status IN ('pending', 'running', 'success', 'error', 'interrupted'))",
        *(s.format(**_TYPES["postgres"]) for s in _0005_COMMON),
    ),
)

# Thread overviews count a thread's messages and compaction markers, and the calls chart lists
# its markers: an index by kind answers both from the index alone.
_0006 = ("CREATE INDEX transcript_kind_idx ON {t}transcript_events (thread_id, kind, seq)",)

# A run executes in the worker that started it; another worker asks it to stop by leaving a
# request here, which the running worker's dispatcher reads (`SqlQueueMixin.request_cancel`).
_0007 = (
    """CREATE TABLE {t}run_cancels (
        run_id TEXT PRIMARY KEY REFERENCES {t}runs (run_id) ON DELETE CASCADE,
        action TEXT NOT NULL CHECK (action IN ('interrupt', 'rollback')),
        requested_at {time} NOT NULL
    )""",
)

MIGRATIONS: tuple[Migration, ...] = (
    _migration(1, "threads, runs, transcript, receipts, thread locks", _0001, _0001_POSTGRES_ONLY),
    _migration(2, "receipts are unique per thread by their own id", _0002),
    _migration(3, "thread leases carry a fencing token", _0003),
    _migration(4, "threads are owned by the identity that created them", _0004),
    _0005,
    _migration(6, "transcript events are indexed by kind", _0006),
    _migration(7, "a worker can ask another to cancel the run it executes", _0007),
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
