"""Retrying SQLite's WAL switch while another connection holds the file (sync and async users).

Switching a fresh database file to WAL answers ``SQLITE_BUSY`` at once (the busy handler does
not apply to it) while another connection is setting the file up, so both SQLite layers — the
gateway's aiosqlite storage and memory's sqlite3 backend — retry it with the same backoff until
their busy timeout.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

__all__ = ["busy_delays", "is_busy"]


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether `exc` is SQLite's "database is busy / locked" (worth retrying)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def busy_delays(timeout_ms: float) -> Iterator[float]:
    """Sleep lengths for retries (5 ms doubling to 100 ms) until `timeout_ms` have passed."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.005
    while time.monotonic() < deadline:
        yield delay
        delay = min(delay * 2, 0.1)
