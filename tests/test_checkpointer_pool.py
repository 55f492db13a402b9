"""The checkpointer's PostgreSQL pool replaces connections a database restart closed.

Found by the reliability faults area (a PostgreSQL restart mid-run): every pooled connection
the restart had closed was still handed out, and each request that took one failed with
`AdminShutdown` (an unhandled 500) until the pool had cycled through them.
"""

from __future__ import annotations

import psycopg
import pytest

from foldwise.gateway._checkpointer import postgres_pool
from tests.support.gateway import drop_schema, postgres_url

pytestmark = pytest.mark.postgres


async def test_a_pooled_connection_the_server_closed_is_replaced() -> None:
    url, dsn, schema = postgres_url()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    try:
        async with postgres_pool(url, max_size=1) as pool:
            async with pool.connection() as conn:
                pid = (await (await conn.execute("SELECT pg_backend_pid() AS pid")).fetchone())[
                    "pid"
                ]
            with psycopg.connect(dsn, autocommit=True) as admin:
                # With a timeout it returns once the backend has exited (its goodbye sent):
                # without one it returns at once, and the pool may check the connection first
                # (seen in CI).
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
            async with pool.connection() as conn:  # the dead one is checked and replaced
                row = await (await conn.execute("SELECT pg_backend_pid() AS pid")).fetchone()
            assert row["pid"] != pid
    finally:
        drop_schema(dsn, schema)
