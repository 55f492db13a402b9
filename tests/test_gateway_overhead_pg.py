"""The gateway's per-run overhead on PostgreSQL, pinned by counts (never by wall-clock time).

A `runs/wait` is counted from what the pooled connections execute (a counting cursor on each
connection a pool hands out, and each explicit transaction opened on it): one checkpointer
transaction per step, its task writes committed with its checkpoint, one lease check per
transaction. Before, each task write was a transaction of its own, with its own lease check.
An interrupt's and an error's writes are in the table once the run has ended (taken along by
a later checkpoint of the run, or committed by the run's end: `tests/test_held_writes.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage

from foldwise.bench._serve import open_app
from foldwise.testing import FailingChatModel, ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user
from tests.test_gateway_overhead import ask_human

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("storage_url", ["postgres"], indirect=True),
]

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


class PgCounter:
    """Counts the statements and transactions of one pool's connections, by first keyword."""

    def __init__(self, pool: Any, lease_sql: str) -> None:
        self.statements: Counter[str] = Counter()
        self.transactions = 0
        self._lease_sql = lease_sql
        counter = self

        class Cursor(psycopg.AsyncCursor[Any]):
            async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                counter.note(query)
                return await super().execute(query, *args, **kwargs)

            async def executemany(self, query: Any, *args: Any, **kwargs: Any) -> None:
                counter.note(query)
                await super().executemany(query, *args, **kwargs)

        original = pool.connection

        @asynccontextmanager
        async def connection(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async with original(*args, **kwargs) as conn:
                if not getattr(conn, "_counted", False):
                    conn.cursor_factory = Cursor
                    begin = conn.transaction

                    def transaction(*args: Any, **kwargs: Any) -> Any:
                        counter.transactions += 1
                        return begin(*args, **kwargs)

                    conn.transaction = transaction
                    conn._counted = True
                yield conn

        pool.connection = connection

    def note(self, query: Any) -> None:
        text = str(query)
        words = text.split()
        if not words:  # the pool's connection check
            return
        self.statements[words[0].upper()] += 1
        if words[0].upper() == "INSERT":
            self.statements[f"INSERT {words[2]}"] += 1
        if text == self._lease_sql:
            self.statements["lease check"] += 1

    def reset(self) -> None:
        self.statements.clear()
        self.transactions = 0


async def _wait(client: Any, thread: str, text: str) -> dict[str, Any]:
    response = await client.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user(text)}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_run_costs_one_transaction_per_step_and_one_lease_check_each(
    tmp_path: Path, storage_url: str
) -> None:
    model = ScriptedChatModel(default="ok")
    config = gateway_config(tmp_path, {**QUIET, "storage": {"url": storage_url}})
    async with open_app(config, scripted_factory(model)) as (client, app):
        gateway = app.state.gateway
        lease_sql = gateway.storage.lease_check_sql()
        checkpoints = PgCounter(gateway.checkpointer.conn, lease_sql)
        storage = PgCounter(gateway.storage._dialect._pool, lease_sql)  # no public handle
        thread = (await client.post("/threads", json={})).json()["thread_id"]
        await _wait(client, thread, "warm up")
        checkpoints.reset()
        storage.reset()
        values = await _wait(client, thread, "hello")
        assert [m["type"] for m in values["messages"]][-2:] == ["human", "ai"]
        # Storage: lease taken; run row + thread busy + input (one); the answer; run row
        # finished + thread idle (one); lease released.
        assert storage.transactions == 5, storage.statements
        counts = checkpoints.statements
        steps = counts["INSERT checkpoints"]
        # input, start, foldwise's before_model (run start included), model: the middleware
        # runs fused, one node per hook kind (8 steps before).
        assert steps == 4, counts
        assert counts["INSERT checkpoint_writes"] >= 3, counts
        # One transaction per step, one lease check each: the step's task writes commit with
        # its checkpoint (before: 15 transactions and 15 lease checks for 8 steps).
        assert checkpoints.transactions == steps, (checkpoints.transactions, counts)
        assert counts["lease check"] == steps, counts
        # The rest are the run's two reads of its head (its start and its answer).
        assert counts["SELECT"] == steps + 2, counts


async def _stored_channels(saver: Any, thread: str, channel: str) -> list[str]:
    """The thread's task writes to `channel` in the table (read behind the saver's back)."""
    async with saver.conn.connection() as conn:
        cursor = await conn.execute(
            "SELECT channel FROM checkpoint_writes WHERE thread_id = %s AND channel = %s",
            (thread, channel),
        )
        return [row["channel"] for row in await cursor.fetchall()]


async def test_writes_no_checkpoint_takes_along_are_committed_when_the_run_ends(
    tmp_path: Path, storage_url: str
) -> None:
    call = AIMessage("", tool_calls=[{"name": "ask_human", "args": {"question": "ok?"}, "id": "q"}])
    factory = scripted_factory(ScriptedChatModel(responses=[call]), tools=[ask_human])
    config = gateway_config(tmp_path, {**QUIET, "storage": {"url": storage_url}})
    async with open_app(config, factory) as (client, app):
        thread = (await client.post("/threads", json={})).json()["thread_id"]
        await _wait(client, thread, "please ask")
        saver = app.state.gateway.checkpointer
        assert await _stored_channels(saver, thread, "__interrupt__") == ["__interrupt__"]
        assert (await client.get(f"/threads/{thread}")).json()["status"] == "interrupted"


async def test_a_failed_steps_error_write_is_committed_when_the_run_ends(
    tmp_path: Path, storage_url: str
) -> None:
    config = gateway_config(tmp_path, {**QUIET, "storage": {"url": storage_url}})
    async with open_app(config, scripted_factory(FailingChatModel())) as (client, app):
        thread = (await client.post("/threads", json={})).json()["thread_id"]
        response = await client.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("hi")}
        )
        assert response.status_code >= 500
        saver = app.state.gateway.checkpointer
        assert await _stored_channels(saver, thread, "__error__") == ["__error__"]
