"""The Python half of the conformance harness: `langgraph_sdk` (async client) call by call.

Mirrors tests/js/conformance.mjs: the same named calls in the same order, each caught on its
own, each reported as ``{call, ok, status?, error?, detail}`` with `detail` from `summarize`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

__all__ = ["ASSISTANT", "STREAM_MODES", "run_python_client", "summarize"]

ASSISTANT = "agent"
STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "events",
    "debug",
    "tasks",
    "checkpoints",
    "custom",
)


def summarize(value: Any) -> dict[str, Any]:
    """Summarize a result: kind, sorted keys, status and message counts (mirrors the JS one)."""
    if value is None:
        return {"kind": "null"}
    if isinstance(value, list):
        out: dict[str, Any] = {"kind": "array", "length": len(value)}
        if value:
            out["item"] = summarize(value[0])
        return out
    if isinstance(value, bool):
        return {"kind": "boolean", "value": value}
    if isinstance(value, int | float):
        return {"kind": "number", "value": value}
    if isinstance(value, str):
        return {"kind": "string"}
    data = dict(value)
    out = {"kind": "object", "keys": sorted(data)}
    if isinstance(data.get("status"), str):
        out["status"] = data["status"]
    messages = data.get("messages")
    if not isinstance(messages, list) and isinstance(data.get("values"), dict):
        messages = data["values"].get("messages")
    if isinstance(messages, list):
        out["messages"] = len(messages)
        if messages:
            out["last_type"] = messages[-1].get("type")
    return out


@dataclass
class _Drained:
    summary: dict[str, Any]


async def _drain(stream: AsyncIterator[Any]) -> _Drained:
    """Read a stream to its end: event names in first-seen order and the part count."""
    events: list[str] = []
    count = 0
    error: Any = None
    async for part in stream:
        count += 1
        name = str(part.event).split("|")[0]
        if name not in events:
            events.append(name)
        if name == "error":
            error = part.data
    if error is not None:
        raise RuntimeError(f"stream error event: {error}")
    return _Drained({"kind": "stream", "events": events, "count": count})


def _needed(value: str, call: str) -> str:
    """The id an earlier call produced, or an error naming that call."""
    if not value:
        raise RuntimeError(f"no id: {call} failed")
    return value


def _input(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@dataclass
class _Calls:
    """The calls, in order, sharing the ids they create (a thread, its head, a run)."""

    client: LangGraphClient
    metadata: dict[str, Any] = field(default_factory=lambda: {"suite": "conformance"})
    thread_id: str = ""
    checkpoint: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    listed_run_id: str = ""
    queued_id: str = ""

    def catalogue(self) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
        c, a, tid = self.client, ASSISTANT, lambda: self.thread_id
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("assistants.search", lambda: c.assistants.search(limit=10)),
            ("assistants.get", lambda: c.assistants.get(a)),
            ("assistants.getGraph", lambda: c.assistants.get_graph(a)),
            ("assistants.getSchemas", lambda: c.assistants.get_schemas(a)),
            ("threads.create", self.create_thread),
            ("threads.get", lambda: c.threads.get(tid())),
            (
                "threads.update",
                lambda: c.threads.update(tid(), metadata={**self.metadata, "step": "update"}),
            ),
            ("threads.search", lambda: c.threads.search(metadata=self.metadata, limit=10)),
            ("threads.count", lambda: c.threads.count(metadata=self.metadata)),
            ("runs.wait", lambda: c.runs.wait(tid(), a, input=_input("hi"))),
        ]
        calls += [(f"runs.stream[{mode}]", self.streamer(mode)) for mode in STREAM_MODES]
        calls.append(("runs.stream[subgraphs]", self.stream_subgraphs))
        calls += [
            ("threads.getState", self.get_state),
            ("threads.getHistory", lambda: c.threads.get_history(tid(), limit=3)),
            (
                "threads.getState[checkpoint_id]",
                lambda: c.threads.get_state(tid(), checkpoint_id=self.checkpoint["checkpoint_id"]),
            ),
            ("runs.stream[checkpoint]", self.stream_from_head),
            ("runs.stream[useStream]", self.stream_like_use_stream),
            ("runs.wait[input=null]", lambda: c.runs.wait(tid(), a, input=None)),
            ("threads.updateState", self.update_state),
            ("threads.copy", lambda: c.threads.copy(tid())),
            ("runs.list", self.list_runs),
            ("runs.get", lambda: c.runs.get(tid(), _needed(self.listed_run_id, "runs.list"))),
            ("runs.create", self.create_run),
            ("runs.join", lambda: c.runs.join(tid(), _needed(self.run_id, "runs.create"))),
            ("runs.joinStream", self.join_stream),
            ("runs.cancel", self.cancel),
            ("runs.create[enqueue]", self.create_enqueued),
            ("runs.join[enqueued]", lambda: c.runs.join(tid(), _needed(self.queued_id, "enqueue"))),
            ("runs.create[rollback]", self.create_rollback),
            ("runs.cancel[rollback]", self.cancel_rollback),
            ("runs.wait[stateless]", lambda: c.runs.wait(None, a, input=_input("once"))),
            (
                "runs.stream[stateless]",
                lambda: _drain(c.runs.stream(None, a, input=_input("once"), stream_mode="values")),
            ),
            ("threads.delete", self.delete_thread),
            *self.store_calls(),
        ]
        return calls

    def store_calls(self) -> list[tuple[str, Callable[[], Awaitable[Any]]]]:
        """`client.store.*`: put, get, a missing get, search, namespaces, delete."""
        store, ns = self.client.store, ["conformance", "python"]

        async def search() -> Any:
            found = await store.search_items(["conformance"], filter={"n": 1}, limit=5)
            return found["items"]

        async def namespaces() -> Any:
            return (await store.list_namespaces(prefix=["conformance"], max_depth=2))["namespaces"]

        async def delete() -> Any:
            await store.delete_item(ns, key="item-1")
            return await store.get_item(ns, key="item-1")

        return [
            ("store.putItem", lambda: store.put_item(ns, key="item-1", value={"n": 1})),
            ("store.getItem", lambda: store.get_item(ns, key="item-1")),
            ("store.getItem[missing]", lambda: store.get_item(ns, key="no-such-item")),
            ("store.searchItems", search),
            ("store.listNamespaces", namespaces),
            ("store.deleteItem", delete),
        ]

    def streamer(self, mode: str) -> Callable[[], Awaitable[_Drained]]:
        def call() -> Awaitable[_Drained]:
            parts = self.client.runs.stream(
                self.thread_id, ASSISTANT, input=_input(f"stream {mode}"), stream_mode=mode
            )
            return _drain(parts)

        return call

    async def stream_subgraphs(self) -> _Drained:
        parts = self.client.runs.stream(
            self.thread_id,
            ASSISTANT,
            input=_input("stream subgraphs"),
            stream_mode=["values", "updates"],
            stream_subgraphs=True,
        )
        return await _drain(parts)

    async def create_thread(self) -> Any:
        thread = await self.client.threads.create(metadata=self.metadata)
        self.thread_id = thread["thread_id"]
        return thread

    async def get_state(self) -> Any:
        state = await self.client.threads.get_state(self.thread_id)
        self.checkpoint = dict(state["checkpoint"])
        return state

    async def stream_from_head(self) -> _Drained:
        parts = self.client.runs.stream(
            self.thread_id,
            ASSISTANT,
            input=_input("from the head"),
            checkpoint=self.checkpoint,
            stream_mode=["values", "messages-tuple"],
        )
        return await _drain(parts)

    async def stream_like_use_stream(self) -> _Drained:
        """What useStream (agent-chat-ui) sends once a thread has history."""
        checkpoint = {k: v for k, v in self.checkpoint.items() if k != "thread_id"}
        parts = self.client.runs.stream(
            self.thread_id,
            ASSISTANT,
            input=_input("as useStream sends it"),
            checkpoint=checkpoint,
            stream_mode=["values", "messages-tuple"],
            stream_resumable=True,
            on_disconnect="continue",
        )
        return await _drain(parts)

    async def update_state(self) -> Any:
        values = {"messages": [{"type": "ai", "content": "an edited answer"}]}
        return await self.client.threads.update_state(self.thread_id, values, as_node="model")

    async def list_runs(self) -> Any:
        runs = await self.client.runs.list(self.thread_id, limit=10)
        self.listed_run_id = runs[0]["run_id"] if runs else ""
        return runs

    async def create_run(self) -> Any:
        run = await self.client.runs.create(self.thread_id, ASSISTANT, input=_input("bg"))
        self.run_id = run["run_id"]
        return run

    async def join_stream(self) -> _Drained:
        run = await self.client.runs.create(self.thread_id, ASSISTANT, input=_input("join"))
        return await _drain(self.client.runs.join_stream(self.thread_id, run["run_id"]))

    async def cancel(self) -> Any:
        run = await self.client.runs.create(self.thread_id, ASSISTANT, input=_input("slow"))
        await asyncio.sleep(0.2)  # let the worker pick it up: the cancel then interrupts it
        await self.client.runs.cancel(self.thread_id, run["run_id"], wait=True, action="interrupt")
        return await self.client.runs.get(self.thread_id, run["run_id"])

    async def create_enqueued(self) -> Any:
        """A run queued behind a busy one (`pending`)."""
        await self.client.runs.create(self.thread_id, ASSISTANT, input=_input("busy enqueue"))
        run = await self.client.runs.create(
            self.thread_id, ASSISTANT, input=_input("queued"), multitask_strategy="enqueue"
        )
        self.queued_id = run["run_id"]
        return run

    async def _gone(self, run_id: str) -> bool:
        try:
            await self.client.runs.get(self.thread_id, run_id)
        except httpx.HTTPStatusError as error:
            if error.response.status_code == 404:
                return True
            raise
        return False

    async def create_rollback(self) -> Any:
        """A run that rolls back the busy one (which must be gone afterwards)."""
        busy = await self.client.runs.create(
            self.thread_id, ASSISTANT, input=_input("busy rollback")
        )
        await asyncio.sleep(0.2)
        run = await self.client.runs.create(
            self.thread_id, ASSISTANT, input=_input("instead"), multitask_strategy="rollback"
        )
        await self.client.runs.join(self.thread_id, run["run_id"])
        if not await self._gone(busy["run_id"]):
            raise RuntimeError("the rolled-back run is still readable")
        return run

    async def cancel_rollback(self) -> None:
        run = await self.client.runs.create(self.thread_id, ASSISTANT, input=_input("busy undo"))
        await asyncio.sleep(0.2)
        await self.client.runs.cancel(self.thread_id, run["run_id"], wait=True, action="rollback")
        if not await self._gone(run["run_id"]):
            raise RuntimeError("the rolled-back run is still readable")

    async def delete_thread(self) -> None:
        doomed = await self.client.threads.create(metadata={**self.metadata, "doomed": True})
        await self.client.threads.delete(doomed["thread_id"])
        try:
            await self.client.threads.get(doomed["thread_id"])
        except httpx.HTTPStatusError as error:
            if error.response.status_code == 404:
                return
            raise
        raise RuntimeError("the deleted thread is still readable")


async def run_python_client(url: str, api_key: str | None = None) -> list[dict[str, Any]]:
    """Run every call against the gateway at `url`; one result dict per call, in order."""
    results: list[dict[str, Any]] = []
    async with get_client(url=url, api_key=api_key, timeout=30) as client:
        calls = _Calls(client, metadata={"suite": "conformance", "client": "python"})
        for name, call in calls.catalogue():
            line: dict[str, Any] = {"call": name}
            try:
                result = await call()
            except Exception as error:  # every failure is a finding, not a crash
                line.update(ok=False, error=str(error)[:300])
                if isinstance(error, httpx.HTTPStatusError):
                    line["status"] = error.response.status_code
            else:
                detail = result.summary if isinstance(result, _Drained) else summarize(result)
                line.update(ok=True, detail=detail)
            results.append(line)
    return results
