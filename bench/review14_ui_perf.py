"""Review 14: time the page's heavy reads.

Run by hand: `PYTHONPATH=. python bench/review14_ui_perf.py [pg]`.

Builds THREADS threads, each with a checkpoint of MESSAGES messages (written through the
agent's `aupdate_state`) and the same messages in its transcript, then times
`POST /threads/overview` (limit 50 and 200) and `GET /transcript` pages of one thread of
BIG messages (newest page, and a walk backwards), with and without the checkpoint read.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from tests.support.gateway import (
    drop_schema,
    gateway_config,
    open_gateway,
    postgres_url,
    scripted_factory,
)

from foldwise.gateway._messages import message_record
from foldwise.gateway.storage import TranscriptEvent
from foldwise.testing import ScriptedChatModel

THREADS = 200
MESSAGES = 1000
BIG = 2000


def _messages(tid: str, n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        if i % 2 == 0:
            out.append(HumanMessage(f"question {i} " + "words " * 40, id=f"{tid}-h{i}"))
        else:
            out.append(
                AIMessage(
                    f"answer {i} " + "tokens " * 60,
                    id=f"{tid}-a{i}",
                    usage_metadata={
                        "input_tokens": 100 * i,
                        "output_tokens": 60,
                        "total_tokens": 100 * i + 60,
                    },
                )
            )
    return out


async def _thread(c: Any, app: Any, tid: str, n: int) -> None:
    r = await c.post("/threads", json={"thread_id": tid})
    assert r.is_success, r.text
    gw = app.state.gateway
    graph = gw.agents.get().graph
    msgs = _messages(tid, n)
    await graph.aupdate_state({"configurable": {"thread_id": tid}}, {"messages": msgs})
    await gw.storage.append_transcript(
        tid,
        [TranscriptEvent(kind="message", message=message_record(m), message_id=m.id) for m in msgs],
    )


async def _time(label: str, make: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        r = await make()
        best = min(best, time.perf_counter() - t)
        assert r.status_code == 200, r.text
    print(f"{label}: best of {repeat} = {best * 1000:.0f} ms")
    return best


async def main(url: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data: dict[str, Any] = {"summarization": {"trigger": {"type": "messages", "value": 100000}}}
        if url:
            data["storage"] = {"url": url}
        config = gateway_config(Path(tmp), data)
        async with open_gateway(config, scripted_factory(ScriptedChatModel(default="ok"))) as (
            c,
            app,
        ):
            t = time.perf_counter()
            await asyncio.gather(*(_thread(c, app, f"t{i:03d}", MESSAGES) for i in range(THREADS)))
            await _thread(c, app, "big", BIG)
            print(f"built {THREADS} x {MESSAGES} + 1 x {BIG} in {time.perf_counter() - t:.1f} s")
            await _time(
                "overview limit=50", lambda: c.post("/threads/overview", json={"limit": 50})
            )
            await _time(
                "overview limit=200", lambda: c.post("/threads/overview", json={"limit": 200})
            )
            await _time(
                "overview limit=200 query=question",
                lambda: c.post("/threads/overview", json={"limit": 200, "query": "zzz"}),
            )
            await _time(
                "transcript newest page (limit=100) of 2,000",
                lambda: c.get(f"/threads/big/transcript?limit=100&before_seq={2**53}"),
            )
            gw = app.state.gateway
            cfg: Any = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}

            async def only_checkpoint() -> Any:
                await gw.checkpointer.aget_tuple(cfg)

                class R:
                    status_code = 200

                return R()

            await _time("  of which aget_tuple(big)", only_checkpoint)
            t = time.perf_counter()
            before = 2**53
            pages = 0
            while True:
                body = (
                    await c.get(f"/threads/big/transcript?limit=100&before_seq={before}")
                ).json()
                pages += 1
                if not body["has_more"]:
                    break
                before = body["next_before_seq"]
            print(f"walk back {pages} pages: {(time.perf_counter() - t) * 1000:.0f} ms")


if __name__ == "__main__":
    if sys.argv[1:] == ["pg"]:
        import pytest

        try:
            url, dsn, schema = postgres_url()
        except pytest.skip.Exception as e:  # type: ignore[attr-defined]
            raise SystemExit(f"postgres unavailable: {e}") from None
        try:
            asyncio.run(main(url))
        finally:
            drop_schema(dsn, schema)
    else:
        asyncio.run(main(None))
