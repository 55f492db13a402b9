"""Concurrent `enqueue` runs on one thread: the transcript keeps the order the model saw.

Found by the load area of the reliability campaign (L2, `foldwise bench reliability --area
load`): with many clients posting on a free thread at once, the first run records its input
only after its start-up reads, and each queued run stores its row and its input in two steps;
concurrent requests interleaved there, so `/transcript` listed the user messages in another
order than the one they ran in (and the state holds).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from foldwise.testing import ScriptedChatModel
from tests.support.gateway import user
from tests.test_gateway_background_runs import contents, sdk_gateway


async def test_concurrent_enqueued_runs_are_recorded_in_the_order_they_run(
    tmp_path: Path,
) -> None:
    asyncio.get_running_loop().set_debug(True)
    model = ScriptedChatModel(default=lambda messages: f"re: {messages[-1].content}")
    async with sdk_gateway(tmp_path, model) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        texts = [f"message {n}" for n in range(12)]
        await asyncio.gather(
            *(
                client.runs.wait(thread, "agent", input=user(t), multitask_strategy="enqueue")
                for t in texts
            )
        )
        state = contents((await client.threads.get_state(thread))["values"])
        page = await client.http.get(f"/threads/{thread}/transcript", params={"limit": 1000})
        recorded = [e["message"] for e in page["entries"]]
        assert sorted(state[::2]) == sorted(texts)
        assert state[1::2] == [f"re: {t}" for t in state[::2]]  # each answer follows its input
        # Queued inputs are recorded when accepted, answers when they happen: each kind is in
        # the order the runs ran.
        assert [m["content"] for m in recorded if m["type"] == "human"] == state[::2]
        assert [m["content"] for m in recorded if m["type"] == "ai"] == state[1::2]


async def test_each_enqueued_wait_answers_with_its_own_run(tmp_path: Path) -> None:
    """`runs.wait` of a queued run returns that run's final values, never a later run's.

    Found by the load area on PostgreSQL under load: a queued run that started and ended
    before its waiter looked was answered with the thread's current values, which already
    held the next queued run's answer.
    """
    asyncio.get_running_loop().set_debug(True)
    model = ScriptedChatModel(default=lambda messages: f"re: {messages[-1].content}")
    async with sdk_gateway(tmp_path, model) as (client, _):
        thread = (await client.threads.create())["thread_id"]
        texts = [f"message {n}" for n in range(16)]
        answers = await asyncio.gather(
            *(
                client.runs.wait(thread, "agent", input=user(t), multitask_strategy="enqueue")
                for t in texts
            )
        )
        last = [contents(a)[-1] for a in answers]  # type: ignore[arg-type]
        assert last == [f"re: {t}" for t in texts]
