"""`foldwise._pg_check`: a pooled connection checked by its socket; a round trip when not quiet.

A healthy idle connection has nothing to read and is handed out without a query; one whose
backend was terminated has the server's error waiting (or a closed socket) and is checked with
psycopg's empty query, which fails, so the pool replaces it (tests/test_checkpointer_pool.py).
"""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from foldwise._pg_check import check_connection, is_quiet
from tests.support.gateway import postgres_url

pytestmark = pytest.mark.postgres


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_quiet_connection_needs_no_round_trip_and_a_terminated_one_is_caught() -> None:
    _, dsn, _ = postgres_url()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1").fetchone()
        assert is_quiet(conn)
        sent: list[str] = []
        original = conn.execute

        def execute(query: str, *args: object, **kwargs: object) -> object:
            sent.append(query)
            return original(query, *args, **kwargs)  # type: ignore[arg-type]

        conn.execute = execute  # type: ignore[method-assign,assignment]
        check_connection(conn)
        assert sent == []  # quiet: no query sent
        _terminate(dsn, conn.info.backend_pid)
        deadline = time.monotonic() + 5
        while is_quiet(conn) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not is_quiet(conn)  # the server's goodbye is on the socket
        with pytest.raises(psycopg.OperationalError):
            check_connection(conn)  # the empty query fails: the pool discards it


def test_a_sync_pool_replaces_a_terminated_connection() -> None:
    _, dsn, _ = postgres_url()
    with ConnectionPool(dsn, min_size=1, max_size=1, check=check_connection, open=True) as pool:
        with pool.connection() as conn:
            pid = conn.info.backend_pid
        _terminate(dsn, pid)
        time.sleep(0.2)
        with pool.connection() as conn:
            assert conn.info.backend_pid != pid
            assert conn.execute("SELECT 1").fetchone() == (1,)
