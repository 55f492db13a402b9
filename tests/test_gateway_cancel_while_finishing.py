"""A cancel that reaches a run while it is recording its end changes nothing.

The run's work is over (its answer is in the thread) and `_finish` is about to write the run's
row and the thread's status, then release the lease. A `runs.cancel` arriving then (from this
worker, or from another through `run_cancels`, which the executing worker's dispatcher reads up
to a poll later, often after a short run's work is over) used to cancel the run's task there:
the task ended cancelled (its waiters got `CancelledError`) and a successful run's row stayed
`running`, then read `error` ("worker died during the run").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from foldwise.testing import ScriptedChatModel
from tests.support.gateway import user
from tests.test_gateway_background_runs import contents, sdk_gateway, until


async def test_a_cancel_during_the_run_s_end_leaves_it_finished(
    tmp_path: Path, storage_url: str
) -> None:
    model = ScriptedChatModel(default=lambda messages: f"answer to {messages[-1].content}")
    async with sdk_gateway(tmp_path, model, storage_url) as (client, app):
        gateway = app.state.gateway
        thread = (await client.threads.create())["thread_id"]
        finishing, go_on = asyncio.Event(), asyncio.Event()
        batch = gateway.storage.batch

        @contextlib.asynccontextmanager
        async def paused(operation: str, *args: Any) -> AsyncIterator[None]:
            if operation == "finish_run":  # the run's row and the thread's status, at its end
                finishing.set()
                await go_on.wait()
            async with batch(operation, *args):
                yield

        gateway.storage.batch = paused
        run = await client.runs.create(thread, "agent", input=user("hi"))
        try:
            await asyncio.wait_for(finishing.wait(), 30)  # the run records its end
            active = gateway.runs.active[run["run_id"]]
            cancelled = await client.runs.cancel(thread, run["run_id"])  # 202
            assert cancelled["run_id"] == run["run_id"]
        finally:
            go_on.set()
        gateway.storage.batch = batch
        await asyncio.wait({active.task}, timeout=30)
        assert active.task.done() and not active.task.cancelled()  # its waiters get its end
        await until(lambda: run["run_id"] not in gateway.runs.active)
        assert (await client.runs.get(thread, run["run_id"]))["status"] == "success"
        assert await gateway.storage.get_thread_lock(thread) is None  # released
        values = await client.runs.wait(thread, "agent", input=user("next"))  # not 409
        assert contents(values) == ["hi", "answer to hi", "next", "answer to next"]
