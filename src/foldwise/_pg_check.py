"""Checking a pooled PostgreSQL connection when it is taken, without a round trip when quiet.

psycopg_pool's `check_connection` sends an empty query on every checkout, so a connection a
database restart (or ``pg_terminate_backend``) closed is replaced instead of handed out. The
gateway takes a connection for each storage operation and each checkpoint write, about sixty
times per create thread + `runs/wait`: one extra round trip each. A server that ends a
connection first sends it an error and closes the socket, so the socket of an idle connection
that is still usable has nothing to read. These checks look at the socket (no round trip) and
send psycopg's empty query only when something arrived, the connection is marked closed or
broken, or the socket cannot be polled. A connection cut without a word from the server (a
network partition) is not detected by either check until it is used.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["check_async_connection", "check_connection", "is_quiet"]


def is_quiet(conn: Any) -> bool:
    """Whether an idle connection is open with nothing waiting on its socket."""
    if conn.closed or conn.broken:
        return False
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.Error):  # no socket to poll (closed underneath)
        return False


async def check_async_connection(conn: Any) -> None:
    """`AsyncConnectionPool`'s `check`: an empty query only when the socket is not quiet."""
    if not is_quiet(conn):
        await AsyncConnectionPool.check_connection(conn)


def check_connection(conn: Any) -> None:
    """`ConnectionPool`'s `check`: an empty query only when the socket is not quiet."""
    if not is_quiet(conn):
        ConnectionPool.check_connection(conn)
