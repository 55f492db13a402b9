"""A streaming client that reads slowly, or not at all, cannot grow the gateway's memory.

Each `/runs/stream` buffers a bounded number of frames and bytes; a client that falls further
behind gets one `error` event (`StreamOverflowError`) and its stream ends, while the run goes
on and its result stays readable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk

from foldwise.bench._serve import open_app
from foldwise.gateway._manager import RunSpec
from foldwise.gateway._messages import parse_input_messages
from foldwise.gateway._runs import sse_events
from foldwise.gateway._stream import EventBuffer
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, parse_sse, scripted_factory

WORDS = 400
MAX_EVENTS = 16
MAX_BYTES = 8 * 1024


class ChattyModel(ScriptedChatModel):
    """Streams its answer one word per chunk, like a provider streaming tokens."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        answer = self._generate(messages, stop, run_manager, **kwargs).generations[0].message
        for word in str(answer.content).split(" "):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word + " ", id=answer.id))


def _answer() -> str:
    return " ".join(f"word{i}" for i in range(WORDS))


async def _start(app: Any, thread_id: str) -> Any:
    gateway = app.state.gateway
    await gateway.storage.create_thread(thread_id, {})
    spec = RunSpec(
        thread_id=thread_id,
        assistant_id="agent",
        model_name=None,
        hosted=gateway.agents.get(),
        messages=parse_input_messages([{"role": "user", "content": "talk"}]),
        stream_modes=["messages-tuple"],
    )
    return await gateway.runs.start(spec, stream=True)


async def _drain(buffer: EventBuffer) -> list[tuple[str, Any]]:
    frames = []
    while (frame := await buffer.get()) is not None:
        frames.append(frame)
    return parse_sse(b"".join(frames).decode())


async def test_a_client_that_never_reads_gets_a_bounded_buffer_and_an_error(
    tmp_path: Path,
) -> None:
    model = ChattyModel(default=_answer())
    options = {"stream_buffer_events": MAX_EVENTS, "stream_buffer_bytes": MAX_BYTES}
    async with open_app(gateway_config(tmp_path), scripted_factory(model), **options) as (
        c,
        app,
    ):
        run = await _start(app, "quiet")
        buffer = run.queue
        await run.wait()  # the run is not held up by the client that never reads
        assert run.status == "success"
        assert buffer.overflowed
        assert buffer.peak_events <= MAX_EVENTS and buffer.peak_bytes <= MAX_BYTES
        events = await _drain(buffer)
        assert [name for name, _ in events] == ["error"]
        assert events[0][1]["error"] == "StreamOverflowError"
        assert run.run_id in events[0][1]["message"]
        # The run's outcome and result stay retrievable.
        record = (await c.get(f"/threads/quiet/runs/{run.run_id}")).json()
        assert record["status"] == "success"
        state = (await c.get("/threads/quiet/state")).json()["values"]
        assert state["messages"][-1]["content"].strip() == _answer()


async def test_a_slow_client_reads_a_prefix_then_the_error_and_the_run_is_not_cancelled(
    tmp_path: Path,
) -> None:
    model = ChattyModel(default=_answer())
    options = {"stream_buffer_events": MAX_EVENTS, "stream_buffer_bytes": MAX_BYTES}
    async with open_app(gateway_config(tmp_path), scripted_factory(model), **options) as (
        c,
        app,
    ):
        run = await _start(app, "slow")
        assert run.queue is not None
        stream = sse_events(run, run.queue, "cancel")
        first = [await anext(stream)]  # metadata, then the client stalls
        await run.wait()
        rest = [frame async for frame in stream]
        events = parse_sse(b"".join(first + rest).decode())
        names = [name for name, _ in events]
        assert names[0] == "metadata" and names[-1] == "error"
        assert events[-1][1]["error"] == "StreamOverflowError"
        assert len(names) <= 2 + MAX_EVENTS
        assert run.queue.peak_events <= MAX_EVENTS
        assert run.status == "success"  # ending the stream early did not cancel the run
        transcript = (await c.get("/threads/slow/transcript")).json()["entries"]
        assert transcript[-1]["message"]["content"].strip() == _answer()


def test_event_buffer_bounds_count_and_bytes() -> None:
    buffer = EventBuffer("r1", "t1", max_events=3, max_bytes=10_000)
    for i in range(3):
        buffer.put("messages", {"i": i})
    assert len(buffer) == 3 and not buffer.overflowed
    buffer.put("messages", {"i": 3})  # one too many: the stream ends with an error
    assert buffer.overflowed and len(buffer) == 1
    buffer.put("end", {}, closing=True)  # nothing is queued after the overflow error
    assert len(buffer) == 1 and buffer.peak_events == 3

    big = EventBuffer("r2", "t2", max_events=10, max_bytes=100)
    big.put("values", {"text": "x" * 500})  # one frame always fits an empty buffer
    assert len(big) == 1 and not big.overflowed
    big.put("values", {"text": "y"})  # but nothing more while it waits
    assert big.overflowed

    closing = EventBuffer("r3", "t3", max_events=1, max_bytes=1000)
    closing.put("messages", {"i": 0})
    closing.put("error", {"message": "boom"}, closing=True)
    closing.put("end", {"status": "error"}, closing=True)
    assert not closing.overflowed and len(closing) == 3
