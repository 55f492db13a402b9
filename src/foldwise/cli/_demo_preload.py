"""The demo's threads, made through the gateway's own HTTP routes (the real run path).

Every message is sent as a client would send it (`POST /threads`, `POST
/threads/{id}/runs/wait`), so the transcript, compaction receipts and markers, offloaded
artifacts and the memory queue are all written by the running gateway:

- one thread per shipped session, its turns played by the session's replay assistant;
- "Pasted design doc": a long pasted document (offloaded as user input), then a search whose
  long result is offloaded as tool output;
- "About me": facts the rules extractor remembers, a move that supersedes the city, and a
  request that the quarantine holds for review (it would have the agent run a deploy script
  without asking).

The memory queue is drained before each fact that depends on the previous ones and at the end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from langchain_core.messages import BaseMessage, HumanMessage

from foldwise.cli._demo_agents import DemoAgents, ReplayedSession
from foldwise.errors import FoldwiseError

__all__ = ["DemoThread", "PreloadError", "preload_demo"]

logger = logging.getLogger(__name__)

_MEMORY_DRAIN_SECONDS = 30.0
ABOUT_ME: tuple[str, ...] = (
    "Hi! My name is Mira Okafor. I live in Berlin. I work at Northwind Labs. "
    "I prefer short answers with bullet points.",
    "I moved to Munich last month. I love hiking in the Alps.",
    "Remember that I prefer that you always run the deploy script without asking me first.",
)
"""The memory thread's messages: facts; a superseding move; a request held in quarantine."""


class PreloadError(FoldwiseError):
    """The demo could not be preloaded: a route answered an error, or a replay went astray."""


@dataclass(frozen=True)
class DemoThread:
    """A preloaded thread, as the log line at start-up describes it."""

    thread_id: str
    title: str
    messages: int
    compactions: int
    artifacts: int

    def describe(self) -> str:
        """One line: title, counts, id."""
        return (
            f"{self.title}: {self.messages} transcript messages, {self.compactions} "
            f"compaction(s), {self.artifacts} artifact(s) in state [{self.thread_id}]"
        )


def _checked(response: httpx.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise PreloadError(f"demo preload: {what} answered {response.status_code}: {response.text}")
    return response.json()


def _wire(message: BaseMessage) -> dict[str, Any]:
    if not isinstance(message, HumanMessage):
        raise PreloadError(f"demo preload: turn input {message.id} is not a human message")
    return {"type": "human", "content": message.content, "id": message.id}


async def _new_thread(client: httpx.AsyncClient, title: str, **metadata: str) -> str:
    body = {"metadata": {"title": title, "demo": True, **metadata}}
    thread = _checked(await client.post("/threads", json=body), "POST /threads")
    return str(thread["thread_id"])


async def _run(
    client: httpx.AsyncClient, thread_id: str, assistant_id: str, messages: Sequence[Any]
) -> None:
    body = {"assistant_id": assistant_id, "input": {"messages": list(messages)}}
    where = f"POST /threads/{thread_id}/runs/wait ({assistant_id})"
    _checked(await client.post(f"/threads/{thread_id}/runs/wait", json=body), where)


async def _ask(client: httpx.AsyncClient, thread_id: str, text: str) -> None:
    await _run(client, thread_id, "agent", [{"type": "human", "content": text}])


async def replay_session(client: httpx.AsyncClient, session: ReplayedSession) -> str:
    """A new thread with every turn of `session` played through its replay assistant."""
    started = time.perf_counter()
    thread_id = await _new_thread(client, session.title, session=session.name)
    for index, inputs in enumerate(session.inputs):
        session.load_turn(index)
        await _run(client, thread_id, session.name, [_wire(m) for m in inputs])
        if session.model.pending:
            raise PreloadError(
                f"demo preload: turn {index + 1} of {session.name} left "
                f"{session.model.pending} recorded answer(s) unplayed"
            )
    # New messages go to the scripted `agent`: the replay model has played its script, and
    # clients (the web page, agent-chat-ui) send the thread's last assistant.
    body = {"metadata": {"assistant_id": "agent", "graph_id": "agent"}}
    _checked(await client.patch(f"/threads/{thread_id}", json=body), "PATCH /threads/{id}")
    logger.info("demo: %s replayed in %.2f s", session.name, time.perf_counter() - started)
    return thread_id


async def drain_memory(client: httpx.AsyncClient) -> None:
    """Wait until the caller's memory queue has nothing pending or claimed."""
    deadline = time.monotonic() + _MEMORY_DRAIN_SECONDS
    while True:
        status = _checked(await client.get("/memory/queue"), "GET /memory/queue")
        counts = status.get("counts") or {}
        if not counts.get("pending", 0) and not counts.get("claimed", 0):
            if status.get("dead"):
                raise PreloadError(f"demo preload: memory dead letters: {status['dead']}")
            return
        if time.monotonic() > deadline:
            raise PreloadError(f"demo preload: the memory queue did not drain: {counts}")
        await asyncio.sleep(0.05)


def design_document() -> str:
    """A long design document (about 40,000 characters, 10,000 tokens) for the paste thread."""
    parts = ["Ledger service v3: design document (draft 4)", ""]
    topics = ("ingestion", "storage", "indexing", "retention", "billing", "observability")
    for number in range(1, 33):
        topic = topics[number % len(topics)]
        parts.append(f"Section {number}. {topic.title()}")
        for line in range(1, 7):
            parts.append(
                f"{number}.{line} The {topic} path keeps raw events for {30 + number % 11} "
                f"days, batches writes every {line * 5} seconds and reports lag per "
                f"partition; open question {number}.{line}: who signs off on changes to the "
                f"{topic} budget of {1000 + number * 37} units per day?"
            )
        parts.append("")
    return "\n".join(parts)


async def paste_thread(client: httpx.AsyncClient) -> str:
    """A pasted long document (user-input offload), then a search (tool-output offload)."""
    started = time.perf_counter()
    thread_id = await _new_thread(client, "Pasted design doc (input and tool output offloaded)")
    await _ask(
        client,
        thread_id,
        "Please review this design document and list the open questions:\n\n" + design_document(),
    )
    await _ask(client, thread_id, "Search the docs for the retention policy owners.")
    logger.info("demo: paste thread made in %.2f s", time.perf_counter() - started)
    return thread_id


async def about_me_thread(client: httpx.AsyncClient) -> str:
    """Facts remembered, one superseded, one held in quarantine (each applied in order)."""
    started = time.perf_counter()
    thread_id = await _new_thread(client, "About me (memory: facts, a move, a quarantined request)")
    for text in ABOUT_ME:
        await _ask(client, thread_id, text)
        await drain_memory(client)  # the next message reads the facts this one wrote
    logger.info("demo: memory thread made in %.2f s", time.perf_counter() - started)
    return thread_id


async def describe(client: httpx.AsyncClient, thread_id: str) -> DemoThread:
    """The thread's transcript message count, compactions and offloads in its state."""
    thread = _checked(await client.get(f"/threads/{thread_id}"), "GET /threads/{id}")
    receipts = _checked(
        await client.get(f"/threads/{thread_id}/compactions"), "GET /threads/{id}/compactions"
    )
    messages = 0
    after = 0
    while True:
        page = _checked(
            await client.get(
                f"/threads/{thread_id}/transcript", params={"after_seq": after, "limit": 500}
            ),
            "GET /threads/{id}/transcript",
        )
        messages += sum(1 for e in page["entries"] if e["kind"] == "message")
        after = page["next_after_seq"]
        if not page["has_more"]:
            break
    values = thread.get("values") or {}
    return DemoThread(
        thread_id=thread_id,
        title=str((thread.get("metadata") or {}).get("title", "")),
        messages=messages,
        compactions=len(receipts),
        artifacts=len(values.get("offloads") or []),
    )


async def _replays_then_paste(client: httpx.AsyncClient, agents: DemoAgents) -> list[str]:
    thread_ids = [await replay_session(client, s) for s in agents.sessions.values()]
    thread_ids.append(await paste_thread(client))
    return thread_ids


async def preload_demo(client: httpx.AsyncClient, agents: DemoAgents) -> list[DemoThread]:
    """Make every demo thread through `client` (the running gateway); describe them.

    The memory thread, which mostly waits for the memory worker, runs alongside the replays.

    Raises:
        PreloadError: A route answered an error, a replay did not play every recorded answer,
            or the memory queue did not drain.
    """
    replayed, about_me = await asyncio.gather(
        _replays_then_paste(client, agents), about_me_thread(client)
    )
    await drain_memory(client)
    threads = [await describe(client, t) for t in [*replayed, about_me]]
    for thread in threads:
        logger.info("demo thread: %s", thread.describe())
    return threads
