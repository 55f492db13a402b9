"""A worker that stalled while claiming a queued run must not free the thread for the worker
that took the claim over after the lease lapsed.

A queued run's lease holder is the run's id, the same in every worker that claims it. Worker A
takes the lease for run X, then stalls (a slow query, a paused process) past the lease TTL;
worker B takes the lapsed lease for X (a new fencing token) and runs X. When A wakes up, X is
no longer pending, so A lets its claim go: that release must be A's (its token), not B's.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from foldwise.gateway._queue import spec_from_request
from foldwise.gateway.storage import open_storage
from tests.support.gateway import Gate, user
from tests.test_gateway_background_runs import gated, sdk_gateway

_TTL = 1.0
_RUN = str(uuid.uuid4())


async def _claim_when_lapsed(gateway: Any, record: Any, request: Any) -> Any:
    spec = spec_from_request(record, request, gateway.queue.hosted)
    for _ in range(200):
        run = await gateway.runs.claim(spec, record.run_id)
        if run is not None:
            return run
        await asyncio.sleep(0.05)
    raise AssertionError("the lease never lapsed")


async def test_a_stale_claim_leaves_the_new_claimant_s_lease_alone(
    tmp_path: Path, storage_url: str
) -> None:
    gate = Gate()
    model = gated(gate)
    options = {"lease_ttl_seconds": _TTL}
    async with (
        sdk_gateway(tmp_path, model, storage_url, **options) as (a, app_a),
        sdk_gateway(tmp_path, model, storage_url, **options) as (_, app_b),
    ):
        gw_a, gw_b = app_a.state.gateway, app_b.state.gateway
        for gateway in (gw_a, gw_b):
            await gateway.queue.stop()  # the claims below are made by hand
        storage = gw_a.storage
        thread = (await a.threads.create())["thread_id"]
        assert await storage.acquire_thread_lease(thread, "blocker", "run", 60)
        queued = await a.runs.create(
            thread, "agent", input=user("queued"), multitask_strategy="enqueue"
        )
        assert queued["status"] == "pending"
        await storage.release_thread_lock(thread, "blocker")
        run_id = queued["run_id"]
        record = await storage.get_run(run_id)
        request = await storage.queued_request(run_id)

        # A takes the lease for the run, then its next query stalls until B took the claim over.
        stalling, taken_over = asyncio.Event(), asyncio.Event()
        pending_runs = gw_a.storage.thread_pending_runs

        async def stalled(thread_id: str) -> Any:
            stalling.set()
            await taken_over.wait()
            return await pending_runs(thread_id)

        gw_a.storage.thread_pending_runs = stalled
        spec_a = spec_from_request(record, request, gw_a.queue.hosted)
        claim_a = asyncio.create_task(gw_a.runs.claim(spec_a, run_id))
        try:
            await asyncio.wait_for(stalling.wait(), 30)  # A holds the lease
            run_b = await _claim_when_lapsed(gw_b, record, request)
            await gate.wait_entered()  # X executes in B
            held = await storage.get_thread_lock(thread)
            assert held is not None and held.holder == run_id
            taken_over.set()
            assert await asyncio.wait_for(claim_a, 30) is None  # not pending any more
            lock = await storage.get_thread_lock(thread)
            assert lock is not None and (lock.holder, lock.token) == (run_id, held.token)
        finally:
            taken_over.set()
            gate.release()
        await run_b.wait()
        assert (await storage.get_run(run_id)).status == "success"
        assert run_b.final_values["messages"][-1].content == "answer 1 to queued"


async def test_release_renew_and_fail_pending_spare_the_new_claimant(storage_url: str) -> None:
    async with open_storage(storage_url) as storage:
        await storage.create_thread("t")
        await storage.enqueue_run("t", _RUN, "agent", {})
        stale = await storage.acquire_thread_lease("t", _RUN, "run", 0.001)
        assert stale is not None
        await asyncio.sleep(0.01)  # lapsed: the next claim of the same run takes it over
        fresh = await storage.acquire_thread_lease("t", _RUN, "run", 60)
        assert fresh is not None and fresh.token == stale.token + 1
        assert await storage.start_pending_run(_RUN)
        assert not await storage.renew_thread_lock("t", _RUN, 60, token=stale.token)
        assert not await storage.release_thread_lock("t", _RUN, token=stale.token)
        assert not await storage.fail_pending_run(_RUN, "could not start")  # it runs
        assert await storage.holds_thread_lock("t", _RUN, fresh.token)
        assert (await storage.get_run(_RUN)).status == "running"
        assert await storage.renew_thread_lock("t", _RUN, 60, token=fresh.token)
        assert await storage.release_thread_lock("t", _RUN, token=fresh.token)
