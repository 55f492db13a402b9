"""A lease that lapsed is lost, even when nobody took it over: its holder cannot renew it.

A worker stalls (here: inside a lease renewal) past the lease's TTL. Meanwhile a reader in
another worker settles the run: its thread's lease is free, so the run is a dead worker's and
reads `error` ("worker died during the run"). When the worker wakes up, its renewal used to
succeed (it matched the holder and token, not the expiry), so the run went on and wrote its
answer into a thread whose run row says it died.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tests.support.gateway import Gate, user
from tests.test_gateway_background_runs import contents, gated, sdk_gateway


async def _expire(url: str, thread_id: str) -> None:
    """The thread's lease lapses: its expiry moves to the past."""
    if url.startswith("sqlite:"):
        with closing(sqlite3.connect(url[len("sqlite:///") :], timeout=5)) as conn, conn:
            query = "UPDATE thread_locks SET expires_at = ? WHERE thread_id = ?"
            assert conn.execute(query, (time.time() - 1, thread_id)).rowcount == 1
        return
    dsn, schema = url.split("?schema=")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        query = sql.SQL(
            "UPDATE {}.thread_locks SET expires_at = clock_timestamp() - interval '1 second' "
            "WHERE thread_id = %s"
        ).format(sql.Identifier(schema))
        assert (await conn.execute(query, (thread_id,))).rowcount == 1


async def test_a_lapsed_lease_is_not_renewed(tmp_path: Path, storage_url: str) -> None:
    gate = Gate()
    options = {"lease_ttl_seconds": 1.0}
    model = gated(gate)
    async with (
        sdk_gateway(tmp_path, model, storage_url, **options) as (client, app),
        sdk_gateway(tmp_path, model, storage_url, **options) as (other, _),
    ):
        gateway = app.state.gateway
        renew = gateway.storage.renew_thread_lock
        stalled, go_on = asyncio.Event(), asyncio.Event()

        async def stalling(*args: Any, **kwargs: Any) -> bool:
            stalled.set()
            await go_on.wait()
            return bool(await renew(*args, **kwargs))

        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "agent", input=user("hi"))
        await gate.wait_entered()
        active = gateway.runs.active[run["run_id"]]
        gateway.storage.renew_thread_lock = stalling
        try:
            await asyncio.wait_for(stalled.wait(), 30)  # the worker stalls in a renewal
            await _expire(storage_url, thread)  # past the TTL
            read = await other.runs.get(thread, run["run_id"])  # another worker: it died
            assert (read["status"], read["error"]) == ("error", "worker died during the run")
        finally:
            go_on.set()
            gate.release()
        await asyncio.wait({active.task}, timeout=30)
        gateway.storage.renew_thread_lock = renew
        # The row and the thread agree: the run the row calls dead wrote nothing after.
        state = await client.threads.get_state(thread)
        assert contents(state["values"]) == ["hi"]
        assert (await client.runs.get(thread, run["run_id"]))["status"] == "error"
