"""The routes the web page reads: thread overview, transcript paging, calls, durable texts,
artifacts, each scoped to the caller's identity."""

from __future__ import annotations

import itertools
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

import foldwise
from foldwise.bench._serve import open_app
from foldwise.durable import AUTHORITY_CONTRACT, is_durable_data_message
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.offload import StoreArtifactStore
from foldwise.testing import ScriptedChatModel
from tests.support.async_only_store import AsyncOnlyStore
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory, user

SETTINGS: dict[str, Any] = {
    "models": [
        {"name": "main", "use": "foldwise.testing:ScriptedChatModel", "context_window": 50_000}
    ],
    "summarization": {
        "trigger": [{"type": "messages", "value": 9}, {"type": "tokens", "value": 40_000}],
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
        "preserve_human": {"mode": "none"},
        "reserved_output_tokens": 1000,
    },
    "offload": {"tool_token_limit": 800, "human_token_limit": 800, "preview_chars": 200},
}
PASTE = "\n".join(f"pasted line {i} with some words to make it long" for i in range(120))
KEYS = {"auth": {"api_keys": [{"key": "key-alice", "user": "alice"}, {"key": "k-b", "user": "b"}]}}
ALICE = {"x-api-key": "key-alice"}
BOB = {"x-api-key": "k-b"}


@tool
def big_tool(query: str) -> str:
    """Return a long listing about a query."""
    return "\n".join(
        f"row {i}: {query} result {'needle' if i == 77 else 'hay'}" for i in range(300)
    )


def brain() -> Any:
    summaries = itertools.count(1)

    def respond(messages: list[BaseMessage]) -> Any:
        if is_summarizer_call(messages):
            return f"SUMMARY #{next(summaries)} of the early turns"
        last = messages[-1]
        if isinstance(last, HumanMessage) and "use tool" in str(last.content):
            call = {"name": "big_tool", "args": {"query": "q"}, "id": f"call-{uuid.uuid4().hex}"}
            return AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        return "answer " * 10

    return respond


async def _run(c: httpx.AsyncClient, thread: str, text: str, headers: Any = None) -> None:
    r = await c.post(
        f"/threads/{thread}/runs/wait",
        json={"assistant_id": "agent", "input": user(text)},
        headers=headers,
    )
    assert r.status_code == 200, r.text


async def _build_thread(c: httpx.AsyncClient, thread: str = "t", headers: Any = None) -> None:
    """A tool offload, a pasted input, an automatic compaction, a manual one, a last turn."""
    assert (await c.post("/threads", json={"thread_id": thread}, headers=headers)).is_success
    await _run(c, thread, "use tool please", headers)
    await _run(c, thread, PASTE, headers)
    for i in range(4):  # passes the 9-message trigger: one automatic compaction
        await _run(c, thread, f"question {i}", headers)
    r = await c.post(
        f"/threads/{thread}/compact",
        json={"keep": {"type": "messages", "value": 2}},
        headers=headers,
    )
    assert r.json()["compacted"] is True, r.text
    await _run(c, thread, "last question", headers)


def _model(config: Any) -> tuple[list[ScriptedChatModel], Any]:
    """A factory building the agent on the configured `main` model (so its window is known),
    scripted by `brain` with usage; the model is appended to the returned list once built."""
    built: list[ScriptedChatModel] = []
    respond = brain()

    def factory(request: AgentRequest) -> HostedAgent:
        graph = foldwise.create_agent(
            request.config, model="main", tools=[big_tool], checkpointer=request.checkpointer
        )
        middleware = foldwise.agent.find_summarization(graph)
        assert middleware is not None
        model = middleware.registry.get("main")
        assert isinstance(model, ScriptedChatModel)
        model.default, model.usage = respond, True
        built.append(model)
        return HostedAgent(graph)

    return built, factory


async def _all_backwards(c: httpx.AsyncClient, thread: str, limit: int) -> list[dict[str, Any]]:
    pages: list[list[dict[str, Any]]] = []
    query = f"/threads/{thread}/transcript?limit={limit}"
    body = (await c.get(f"{query}&before_seq={2**63 - 1}")).json()  # the newest page
    pages.append(body["entries"])
    while body["has_more"]:
        body = (await c.get(f"{query}&before_seq={body['next_before_seq']}")).json()
        assert len(body["entries"]) <= limit
        pages.append(body["entries"])
    return [e for page in reversed(pages) for e in page]


async def test_transcript_calls_context_and_artifacts_of_a_compacted_thread(
    tmp_path: Path,
) -> None:
    config = gateway_config(tmp_path, SETTINGS)
    models, factory = _model(config)
    async with open_app(config, factory) as (c, _):
        await _build_thread(c)
        (model,) = models
        state = (await c.get("/threads/t/state")).json()["values"]
        in_state = {m["id"] for m in state["messages"]}

        # transcript: the same entries forwards and backwards, across both compactions
        forward = (await c.get("/threads/t/transcript?limit=1000")).json()
        entries = forward["entries"]
        assert forward["total"] == len(entries) > 10
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
        assert await _all_backwards(c, "t", 3) == entries
        newest = (await c.get("/threads/t/transcript?limit=3")).json()
        assert [e["seq"] for e in newest["entries"]] == [1, 2, 3]  # unchanged without before_seq
        last_page = (
            await c.get(f"/threads/t/transcript?limit=3&before_seq={len(entries) + 1}")
        ).json()
        assert [e["seq"] for e in last_page["entries"]] == [
            len(entries) - 2,
            len(entries) - 1,
            len(entries),
        ]
        assert last_page["has_more"] is True and last_page["total"] == len(entries)

        # in_context: compacted messages are out, kept ones are in
        messages = [e for e in entries if e["kind"] == "message"]
        assert all(e["in_context"] == (e["message_id"] in in_state) for e in messages)
        assert {e["in_context"] for e in messages} == {True, False}
        assert messages[0]["in_context"] is False and messages[-1]["in_context"] is True

        # compaction markers carry the summary and the receipt's details
        markers = [e["message"] for e in entries if e["kind"] == "compaction"]
        assert [m["manual"] for m in markers] == [False, True]
        assert markers[0]["summary"].startswith("SUMMARY #1")
        assert markers[1]["summary"] == state["summary_text"]
        assert "SUMMARY #2" in markers[1]["summary"]
        receipts = (await c.get("/threads/t/compactions")).json()
        for marker, receipt in zip(markers, receipts, strict=True):
            keys = ("messages_rescued", "duration_ms", "archive_id", "metric", "threshold")
            for key in (*keys, "precomputed"):
                assert marker[key] == receipt[key], key
            assert marker["attempts"] == receipt["attempts"] and marker["attempts"]
        assert all(m["archive_id"] for m in markers)

        # calls: every AI message with usage, and both compaction points
        calls = (await c.get("/threads/t/calls")).json()
        ai_entries = [
            e
            for e in messages
            if e["message"]["type"] == "ai" and e["message"].get("usage_metadata")
        ]
        assert [x["seq"] for x in calls["calls"]] == [e["seq"] for e in ai_entries]
        assert all(x["input_tokens"] > 0 and x["model"] == "scripted" for x in calls["calls"])
        assert [x["receipt_id"] for x in calls["compactions"]] == [r["id"] for r in receipts]
        assert [x["manual"] for x in calls["compactions"]] == [False, True]
        assert calls["window"] == 50_000 and calls["trigger_tokens"] == 40_000
        assert calls["reserved_output_tokens"] == 1000
        two = (await c.get("/threads/t/calls?limit=2")).json()
        assert two["calls"] == calls["calls"][-2:]
        assert all(x["seq"] > two["calls"][0]["seq"] for x in two["compactions"])
        assert (await c.get("/threads/t/calls?limit=0")).status_code == 422

        # durable: the texts the model received on its last call
        request = [r for r in model.requests if not is_summarizer_call(r.messages)][-1]
        sent_data = [m for m in request.messages if is_durable_data_message(m)]
        sent_contract = [
            m
            for m in request.messages
            if isinstance(m, SystemMessage) and m.content == AUTHORITY_CONTRACT
        ]
        context = (await c.get("/threads/t/context")).json()
        assert context["summary_text"] == state["summary_text"]
        durable = context["durable"]
        assert durable["data"] == sent_data[0].content
        assert durable["contract"] == sent_contract[0].content
        assert durable["sections"] == ["summary_text", "offloads"]

        # artifacts: the tool output, the paste and both archives, newest first
        listed = (await c.get("/threads/t/artifacts")).json()["artifacts"]
        kinds = [a["kind"] for a in listed]
        assert sorted(kinds) == ["archive", "archive", "human", "tool"]
        assert [a["created_at"] for a in listed] == sorted(
            (a["created_at"] for a in listed), reverse=True
        )
        by_seq = {e["seq"]: e for e in entries}
        for artifact in listed:
            origin = artifact["origin"]
            entry = by_seq[origin["seq"]]
            assert entry["message_id"] == origin["message_id"]
            if artifact["kind"] == "tool":
                assert entry["message"]["type"] == "tool"
                assert entry["message"]["tool_call_id"] == artifact["meta"]["tool_call_id"]
            elif artifact["kind"] == "human":
                assert entry["message"]["type"] == "human"
            else:
                assert entry["kind"] == "compaction"
                assert entry["message"]["archive_id"] == artifact["artifact_id"]
        tool_id = next(a["artifact_id"] for a in listed if a["kind"] == "tool")
        page = (await c.get(f"/threads/t/artifacts/{tool_id}?limit=5")).json()
        assert [r["index"] for r in page["rows"]] == [0, 1, 2, 3, 4]
        assert page["rows"][0]["text"] == "row 0: q result hay"
        assert page["next_offset"] == 5 and page["ref"]["artifact_id"] == tool_id
        end = (await c.get(f"/threads/t/artifacts/{tool_id}?offset=298&limit=5")).json()
        assert [r["index"] for r in end["rows"]] == [298, 299] and end["next_offset"] is None
        found = (await c.get(f"/threads/t/artifacts/{tool_id}/search?pattern=needle")).json()
        assert [(m["row"], m["text"]) for m in found["matches"]] == [
            (77, "row 77: q result needle")
        ]
        assert found["complete"] is True and found["regex"] is False
        rx = (
            await c.get(
                f"/threads/t/artifacts/{tool_id}/search",
                params={"pattern": r"row 7\d:", "regex": "true"},
            )
        ).json()
        assert [m["row"] for m in rx["matches"]] == list(range(70, 80))
        human_id = next(a["artifact_id"] for a in listed if a["kind"] == "human")
        pasted = (await c.get(f"/threads/t/artifacts/{human_id}?limit=500")).json()
        assert "\n".join(r["text"] for r in pasted["rows"]) == PASTE

        # errors name the field; unknown ids are 404
        bad = await c.get("/threads/t/artifacts/not-an-id")
        assert bad.status_code == 422 and "artifact_id" in bad.json()["detail"]
        unknown = await c.get(f"/threads/t/artifacts/art_{'0' * 24}")
        assert unknown.status_code == 404
        invalid = await c.get(
            f"/threads/t/artifacts/{tool_id}/search", params={"pattern": "(", "regex": "true"}
        )
        assert invalid.status_code == 422 and invalid.json()["detail"].startswith("pattern")
        assert (await c.get(f"/threads/t/artifacts/{tool_id}?limit=501")).status_code == 422


async def test_overview_lists_title_counts_and_context(tmp_path: Path, storage_url: str) -> None:
    config = gateway_config(tmp_path, {**SETTINGS, "storage": {"url": storage_url}})
    _, factory = _model(config)
    async with open_app(config, factory) as (c, _):
        await _build_thread(c, "built")
        made = await c.post(
            "/threads", json={"thread_id": "fresh", "metadata": {"team": "Pricing_50%"}}
        )
        assert made.is_success
        body = (await c.post("/threads/overview", json={})).json()
        assert [t["thread_id"] for t in body["threads"]] == ["fresh", "built"]
        assert body["has_more"] is False
        fresh, built = body["threads"]
        entries = (await c.get("/threads/built/transcript?limit=1000")).json()["entries"]
        calls = (await c.get("/threads/built/calls")).json()["calls"]
        assert built["title"] == "use tool please" and built["status"] == "idle"
        assert built["message_count"] == sum(e["kind"] == "message" for e in entries)
        assert built["compaction_count"] == 2 and built["artifact_count"] == 4
        assert built["context"] == {
            "tokens": calls[-1]["input_tokens"],
            "window": 50_000,
            "fraction": round(calls[-1]["input_tokens"] / 50_000, 4),
            "as_of": "call",
        }
        assert fresh["title"] == "" and fresh["message_count"] == 0 and fresh["artifact_count"] == 0
        assert fresh["context"] == {
            "tokens": None,
            "window": 50_000,
            "fraction": None,
            "as_of": None,
        }
        assert fresh["metadata"] == {"team": "Pricing_50%"}

        async def ids(**body: Any) -> list[str]:
            r = await c.post("/threads/overview", json=body)
            assert r.status_code == 200, r.text
            return [t["thread_id"] for t in r.json()["threads"]]

        assert await ids(query="USE TOOL") == ["built"]
        assert await ids(query="pricing_50%") == ["fresh"]
        assert await ids(query="ricing_5") == ["fresh"]
        assert await ids(query="%") == ["fresh"]
        assert await ids(query="resh") == ["fresh"]
        assert await ids(limit=1) == ["fresh"]
        second = await c.post("/threads/overview", json={"limit": 1, "offset": 1})
        assert second.json() == {"threads": [built], "has_more": False}
        assert (await c.post("/threads/overview", json={"limit": 1})).json()["has_more"] is True
        # compaction is the latest context entry right after /compact
        await c.post("/threads/built/compact", json={"keep": {"type": "messages", "value": 1}})
        after = (await c.post("/threads/overview", json={"query": "built"})).json()["threads"][0]
        receipts = (await c.get("/threads/built/compactions")).json()
        assert after["context"]["as_of"] == "compaction"
        assert after["context"]["tokens"] == receipts[-1]["tokens_after"]
        for bad, field in (
            ({"limit": 0}, "limit"),
            ({"limit": 201}, "limit"),
            ({"offset": -1}, "offset"),
            ({"query": "q" * 201}, "query"),
            ({"nope": 1}, "nope"),
        ):
            r = await c.post("/threads/overview", json=bad)
            assert r.status_code == 422 and field in r.text, (bad, r.text)
        # the route is not a thread id, and thread routes are not shadowed
        assert (await c.get("/threads/built")).json()["thread_id"] == "built"
        assert (await c.get("/threads/overview")).status_code == 404


async def test_new_routes_answer_404_for_another_identity(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, {**SETTINGS, "gateway": KEYS})
    _, factory = _model(config)
    async with open_app(config, factory) as (c, _):
        await _build_thread(c, "mine", ALICE)
        listed = (await c.get("/threads/mine/artifacts", headers=ALICE)).json()["artifacts"]
        art = listed[0]["artifact_id"]
        paths = [
            "/threads/mine/transcript?before_seq=5",
            "/threads/mine/calls",
            "/threads/mine/context",
            "/threads/mine/artifacts",
            f"/threads/mine/artifacts/{art}",
            f"/threads/mine/artifacts/{art}/search?pattern=row",
        ]
        for path in paths:
            assert (await c.get(path, headers=ALICE)).status_code == 200, path
            theirs = await c.get(path, headers=BOB)
            assert theirs.status_code == 404, (path, theirs.text)
            assert "mine" in theirs.json()["detail"]
        assert (await c.post("/threads/overview", json={}, headers=BOB)).json() == {
            "threads": [],
            "has_more": False,
        }
        assert [
            t["thread_id"]
            for t in (await c.post("/threads/overview", json={}, headers=ALICE)).json()["threads"]
        ] == ["mine"]
        assert (await c.post("/threads/overview", json={})).status_code == 401


async def test_artifacts_of_an_async_only_store(tmp_path: Path) -> None:
    """A Store-backed artifact store is only ever called through its async methods."""
    config = gateway_config(tmp_path, SETTINGS)
    store = AsyncOnlyStore()
    model = ScriptedChatModel(default=brain(), usage=True)

    def factory(request: AgentRequest) -> HostedAgent:
        graph = foldwise.create_agent(
            request.config,
            model=model,
            tools=[big_tool],
            checkpointer=request.checkpointer,
            store=store,
        )
        return HostedAgent(graph, artifact_store=StoreArtifactStore(store))

    async with open_app(config, factory) as (c, _):
        await c.post("/threads", json={"thread_id": "s"})
        await _run(c, "s", "use tool please")
        listed = (await c.get("/threads/s/artifacts")).json()["artifacts"]
        assert [a["kind"] for a in listed] == ["tool"]
        art = listed[0]["artifact_id"]
        page = (await c.get(f"/threads/s/artifacts/{art}?offset=76&limit=2")).json()
        assert [r["text"] for r in page["rows"]] == [
            "row 76: q result hay",
            "row 77: q result needle",
        ]
        found = (
            await c.get(f"/threads/s/artifacts/{art}/search", params={"pattern": "need"})
        ).json()
        assert [m["row"] for m in found["matches"]] == [77]
        overview = (await c.post("/threads/overview", json={})).json()["threads"]
        assert overview[0]["artifact_count"] == 1
        assert store.sync_calls == [] and store.async_calls > 0
        assert re.fullmatch(r"art_[0-9a-f]{24}", art)


@pytest.mark.parametrize("limit", [1, 4])
async def test_backward_pages_of_a_plain_thread(tmp_path: Path, limit: int) -> None:
    config = gateway_config(
        tmp_path, {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
    )
    model = ScriptedChatModel(default="ok")
    async with open_app(config, scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "p"})
        for i in range(3):
            await _run(c, "p", f"m{i}")
        everything = (await c.get("/threads/p/transcript")).json()["entries"]
        assert len(everything) == 6 and all(e["in_context"] for e in everything)
        assert await _all_backwards(c, "p", limit) == everything
        empty = (await c.get("/threads/p/transcript?before_seq=1")).json()
        assert empty["entries"] == [] and empty["has_more"] is False and empty["total"] == 6
        assert (await c.get("/threads/p/transcript?before_seq=0")).status_code == 422
