"""`EventBuffer`: the bounded buffer between a run and the client streaming it (SSE).

A run never waits for its streaming client: a slow client must not hold a thread's lease or
slow the agent down. Instead each stream buffers at most `max_events` frames and `max_bytes`
bytes of encoded frames. A frame always fits into an empty buffer (a single state larger than
`max_bytes` still streams). When a frame does not fit, the client has fallen too far behind:
the frames it has not read are dropped, one `error` event (`StreamOverflowError`, naming the run
and where to read its outcome) is queued and the stream ends after it. The run goes on; its
status is at `GET /threads/{id}/runs/{run_id}` and its result in `GET /threads/{id}/state`.
The closing frames of a run that ends normally (`error` if it failed, then `end`) are always
queued, so they may exceed the bound by those two small frames.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

from foldwise.gateway._serde import jsonable, sse_frame
from foldwise.messages import is_hidden

__all__ = [
    "DEFAULT_STREAM_BUFFER_BYTES",
    "DEFAULT_STREAM_BUFFER_EVENTS",
    "STREAM_EVENTS",
    "EventBuffer",
    "StreamTranslator",
    "graph_stream_modes",
    "scrub",
    "summarizer_chunk",
]

DEFAULT_STREAM_BUFFER_EVENTS = 4096
"""Frames a streaming client may fall behind by before its stream is ended."""
DEFAULT_STREAM_BUFFER_BYTES = 32 * 1024 * 1024
"""Bytes of encoded frames a streaming client may fall behind by before its stream is ended."""


class EventBuffer:
    """Encoded SSE frames waiting for one client, bounded in count and bytes.

    Args:
        run_id: The run streamed (named in the overflow error).
        thread_id: Its thread.
        max_events: Most frames held at once.
        max_bytes: Most bytes of frames held at once (a frame always fits an empty buffer).

    Attributes:
        peak_events: The most frames ever held at once.
        peak_bytes: The most bytes ever held at once.
        overflowed: Whether the client fell behind and the stream was ended early.
    """

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        *,
        max_events: int = DEFAULT_STREAM_BUFFER_EVENTS,
        max_bytes: int = DEFAULT_STREAM_BUFFER_BYTES,
    ) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("stream buffer limits must be positive")
        self.run_id = run_id
        self.thread_id = thread_id
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.peak_events = 0
        self.peak_bytes = 0
        self.overflowed = False
        self._frames: deque[bytes] = deque()
        self._bytes = 0
        self._closed = False
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def nbytes(self) -> int:
        """Bytes of frames held now."""
        return self._bytes

    def put(
        self, event: str, data: Any, *, closing: bool = False, event_id: int | None = None
    ) -> None:
        """Queue an event; end the stream instead if the client is too far behind.

        Args:
            event: The SSE event name.
            data: Its JSON-ready payload.
            closing: A closing frame of the run (`error`, `end`): queued whatever the bound.
            event_id: The frame's SSE `id` (a resumable run numbers its events).
        """
        if self._closed:
            return
        frame = sse_frame(
            event, jsonable(data), event_id=None if event_id is None else str(event_id)
        )
        fits = len(self._frames) < self.max_events and self._bytes + len(frame) <= self.max_bytes
        if not (closing or fits or not self._frames):
            self._overflow()
            return
        self._append(frame)

    def close(self) -> None:
        """End the stream after the frames already queued."""
        self._closed = True
        self._ready.set()

    async def get(self) -> bytes | None:
        """The next frame, waiting for one; `None` once the stream has ended."""
        while not self._frames:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        frame = self._frames.popleft()
        self._bytes -= len(frame)
        return frame

    def _append(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._bytes += len(frame)
        self.peak_events = max(self.peak_events, len(self._frames))
        self.peak_bytes = max(self.peak_bytes, self._bytes)
        self._ready.set()

    def _overflow(self) -> None:
        self.overflowed = True
        self._frames.clear()
        self._bytes = 0
        where = f"/threads/{self.thread_id}/runs/{self.run_id}"
        self._append(
            sse_frame(
                "error",
                {
                    "error": "StreamOverflowError",
                    "message": (
                        f"the client fell more than {self.max_events} events or "
                        f"{self.max_bytes} bytes behind run {self.run_id}, so its stream ends "
                        f"here; the run goes on: its status is at GET {where} and its result "
                        f"in GET /threads/{self.thread_id}/state"
                    ),
                    "run_id": self.run_id,
                },
            )
        )
        self.close()


STREAM_EVENTS: dict[str, frozenset[str]] = {
    "values": frozenset({"values"}),
    "updates": frozenset({"updates"}),
    "messages-tuple": frozenset({"messages"}),
    "messages": frozenset({"messages/metadata", "messages/partial", "messages/complete"}),
    "custom": frozenset({"custom"}),
    "debug": frozenset({"debug"}),
    "tasks": frozenset({"tasks"}),
    "checkpoints": frozenset({"checkpoints"}),
    "events": frozenset({"events"}),
}
"""The SSE event names each stream mode of a run produces (before any `|namespace`)."""

_GRAPH_MODE = {"messages-tuple": "messages", "events": "values"}
_SUMMARIZER_TAGS = frozenset({"nostream", "foldwise:summarize"})
_PRIVATE_KEY_PREFIX = "__foldwise"


def graph_stream_modes(requested: Iterable[str]) -> list[str]:
    """The LangGraph `stream_mode` list for the requested run stream modes (`values` always)."""
    modes = ["values"]
    for mode in requested:
        graph_mode = _GRAPH_MODE.get(mode, mode)
        if graph_mode not in modes:
            modes.append(graph_mode)
    return modes


def summarizer_chunk(metadata: Any) -> bool:
    """Whether a streamed token (or event) comes from the summarizer (never streamed)."""
    tags = metadata.get("tags") if isinstance(metadata, Mapping) else None
    return isinstance(tags, list | tuple) and not _SUMMARIZER_TAGS.isdisjoint(tags)


def scrub(value: Any) -> Any:
    """`value` without the gateway's private config entries (the lease rides in `configurable`)."""
    if isinstance(value, Mapping):
        return {
            k: scrub(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.startswith(_PRIVATE_KEY_PREFIX))
        }
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


class StreamTranslator:
    """Turns LangGraph stream chunks into the SSE events of the requested run stream modes.

    `messages-tuple` sends `messages` events (`[message chunk, metadata]`); the legacy
    `messages` mode sends `messages/metadata` once per message, then `messages/partial` (the
    message so far) per token, or `messages/complete` for a message that arrived whole.
    Subgraph events carry their namespace: `updates|parent:id|child:id`. The summarizer's
    tokens and removal markers are never sent; hidden framework messages neither.

    Args:
        requested: The run's stream modes.
        publish: Sends one event (`ActiveRun.publish`).
    """

    def __init__(self, requested: Iterable[str], publish: Callable[[str, Any], None]) -> None:
        self.requested = frozenset(requested)
        self.publish = publish
        self._partial: dict[str, Any] = {}

    def feed(self, namespace: Sequence[str], mode: str, chunk: Any) -> None:
        """Publish what one LangGraph chunk means for the client."""
        suffix = "".join(f"|{part}" for part in namespace)
        if mode == "messages":
            self._message(suffix, *chunk)
        elif mode in ("debug", "tasks", "checkpoints"):
            if mode in self.requested:
                self.publish(mode + suffix, scrub(chunk))
        elif mode in self.requested:
            self.publish(mode + suffix, chunk)

    def _message(self, suffix: str, message: Any, metadata: Any) -> None:
        if summarizer_chunk(metadata) or message.type == "remove" or is_hidden(message):
            return
        metadata = scrub(metadata)
        if "messages-tuple" in self.requested:
            self.publish("messages" + suffix, [message, metadata])
        if "messages" not in self.requested:
            return
        key = str(message.id)
        if key not in self._partial:
            self.publish("messages/metadata" + suffix, {key: {"metadata": metadata}})
            self._partial[key] = message
        elif isinstance(message, BaseMessageChunk):
            self._partial[key] = self._partial[key] + message
        if isinstance(message, BaseMessageChunk):
            whole = message_chunk_to_message(self._partial[key])
            self.publish("messages/partial" + suffix, [whole])
        else:
            self.publish("messages/complete" + suffix, [message])
