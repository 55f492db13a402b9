"""`POST /threads/{id}/compact`, `/compactions` and `/transcript` in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import Gate, gateway_config, is_summarizer_call, scripted_factory, user

MANUAL_ONLY = {
    "summarization": {
        "trigger": {"type": "messages", "value": 1000},
        "keep": {"type": "messages", "value": 2},
        "min_gain_tokens": 0,
    }
}


def brain(summary: str = "SUMMARY of the early turns") -> Any:
    def respond(messages: list[BaseMessage]) -> str:
        if is_summarizer_call(messages):
            return summary
        return "answer " + "with some length " * 10

    return respond


async def thread_with_turns(c: Any, turns: int = 4) -> str:
    thread = (await c.post("/threads", json={})).json()["thread_id"]
    for i in range(turns):
        r = await c.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "agent", "input": user(f"turn {i}")},
        )
        assert r.status_code == 200, r.text
    return str(thread)


async def test_compact_returns_the_receipt_and_the_transcript_keeps_everything(
    tmp_path: Path,
) -> None:
    model = ScriptedChatModel(default=brain())
    config = gateway_config(
        tmp_path,
        {
            **MANUAL_ONLY,
            "summarization": {**MANUAL_ONLY["summarization"], "preserve_human": {"mode": "none"}},
        },
    )
    async with open_app(config, scripted_factory(model)) as (c, _):
        thread = await thread_with_turns(c)
        before = (await c.get(f"/threads/{thread}/state")).json()
        r = await c.post(f"/threads/{thread}/compact", json={"force": True})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["compacted"] is True and body["summary_updated"] is True
        assert body["reason"] is None
        assert body["removed_message_count"] == 6
        assert body["preserved_message_count"] == 2
        assert body["tokens_after"] < body["tokens_before"]
        receipt = body["receipt"]
        assert receipt["manual"] is True and receipt["trigger"] == "manual"
        assert body["checkpoint_id"] != before["checkpoint"]["checkpoint_id"]

        state = (await c.get(f"/threads/{thread}/state")).json()
        assert state["values"]["summary_text"] == "SUMMARY of the early turns"
        assert len(state["values"]["messages"]) == 2

        receipts = (await c.get(f"/threads/{thread}/compactions")).json()
        assert [x["id"] for x in receipts] == [receipt["id"]]
        assert receipts[0]["run_id"]

        transcript = (await c.get(f"/threads/{thread}/transcript")).json()
        kinds = [e["kind"] for e in transcript["entries"]]
        assert kinds == ["message"] * 8 + ["compaction"]
        texts = [e["message"]["content"] for e in transcript["entries"] if e["kind"] == "message"]
        assert [t for t in texts if t.startswith("turn")] == [f"turn {i}" for i in range(4)]
        marker = transcript["entries"][-1]["message"]
        assert marker["receipt_id"] == receipt["id"] and marker["messages_removed"] == 6

        # More turns after the compaction come after the marker.
        await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("later")}
        )
        page = (
            await c.get(f"/threads/{thread}/transcript", params={"after_seq": 8, "limit": 2})
        ).json()
        assert [e["seq"] for e in page["entries"]] == [9, 10]
        assert page["entries"][1]["message"]["content"] == "later"
        assert page["has_more"] is True and page["next_after_seq"] == 10

        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert any(r["kind"] == "compact" and r["status"] == "success" for r in runs)


async def test_nothing_to_compact_says_precisely_why(tmp_path: Path) -> None:
    model = ScriptedChatModel(default=brain())
    async with open_app(gateway_config(tmp_path, MANUAL_ONLY), scripted_factory(model)) as (
        c,
        _,
    ):
        empty = (await c.post("/threads", json={})).json()["thread_id"]
        r = await c.post(f"/threads/{empty}/compact")
        assert r.status_code == 200
        assert r.json()["compacted"] is False and r.json()["reason"] == "not_enough_messages"

        thread = await thread_with_turns(c, turns=2)
        checkpoint = (await c.get(f"/threads/{thread}/state")).json()["checkpoint"]["checkpoint_id"]
        few = await c.post(
            f"/threads/{thread}/compact", json={"keep": {"type": "messages", "value": 50}}
        )
        assert few.json()["reason"] == "not_enough_messages" and few.json()["receipt"] is None
        assert few.json()["preserved_message_count"] == 4
        below = await c.post(f"/threads/{thread}/compact", json={"force": False})
        assert below.json()["compacted"] is False and below.json()["reason"] == "below_threshold"
        assert below.json()["tokens_before"] == below.json()["tokens_after"] > 0
        # preserve_human "all": everything before the cut is the user's own words → rescued.
        rescued = await c.post(
            f"/threads/{thread}/compact", json={"keep": {"type": "messages", "value": 3}}
        )
        assert rescued.json()["reason"] == "everything_rescued"
        after = (await c.get(f"/threads/{thread}/state")).json()["checkpoint"]["checkpoint_id"]
        assert after == checkpoint  # nothing was written
        assert (await c.get(f"/threads/{thread}/compactions")).json() == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            {"keep": {"type": "fraction", "value": 80}},
            "keep.value: fraction must be in (0, 1], got 80; write 0.8 for 80%, not 80",
        ),
        ({"keep": {"type": "messages", "value": 0}}, "keep.value"),
        ({"keep": {"type": "lines", "value": 3}}, "keep.type"),
        ({"keep": 10}, "keep"),
        ({"force": "yes"}, "force"),
        ({"forse": True}, "forse"),
        ({"model_name": "unknown-model"}, "model_name: 'unknown-model' names no configured model"),
    ],
)
async def test_invalid_compact_bodies_get_422(
    tmp_path: Path, body: dict[str, Any], needle: str
) -> None:
    model = ScriptedChatModel(default=brain())
    async with open_app(gateway_config(tmp_path, MANUAL_ONLY), scripted_factory(model)) as (
        c,
        _,
    ):
        thread = await thread_with_turns(c, turns=2)
        r = await c.post(f"/threads/{thread}/compact", json=body)
        assert r.status_code == 422, r.text
        assert needle in r.json()["detail"]


async def test_compact_unknown_and_malformed_threads(tmp_path: Path) -> None:
    model = ScriptedChatModel(default=brain())
    async with open_app(gateway_config(tmp_path, MANUAL_ONLY), scripted_factory(model)) as (
        c,
        _,
    ):
        r = await c.post("/threads/does-not-exist/compact", json={})
        assert r.status_code == 404 and r.json() == {"detail": "thread 'does-not-exist' not found"}
        r = await c.post("/threads/bad%20id/compact", json={})
        assert r.status_code == 422 and "invalid thread id" in r.json()["detail"]
        for route in ("compactions", "transcript", "context"):
            assert (await c.get(f"/threads/nope/{route}")).status_code == 404


async def test_compact_while_a_run_streams_gets_409(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(default=brain())
    async with open_app(gateway_config(tmp_path, MANUAL_ONLY), scripted_factory(model)) as (
        c,
        _,
    ):
        thread = await thread_with_turns(c, turns=3)
        model.responses.append(gate.respond("slow streamed answer"))
        stream = asyncio.create_task(
            c.post(
                f"/threads/{thread}/runs/stream",
                json={
                    "assistant_id": "agent",
                    "input": user("long one"),
                    "stream_mode": "messages-tuple",
                },
            )
        )
        await gate.wait_entered()
        r = await c.post(f"/threads/{thread}/compact", json={"force": True})
        assert r.status_code == 409
        assert r.json()["detail"] == (
            f"thread '{thread}' has a run in flight; retry after it finishes"
        )
        assert 1 <= int(r.headers["retry-after"]) <= 5
        gate.release()
        assert (await stream).status_code == 200
        assert (await c.post(f"/threads/{thread}/compact", json={})).json()["compacted"] is True


async def test_compact_when_disabled_gets_409(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="x")
    config = gateway_config(tmp_path, {"summarization": {"enabled": False}})
    async with open_app(config, scripted_factory(model)) as (c, _):
        thread = await thread_with_turns(c, turns=1)
        r = await c.post(f"/threads/{thread}/compact", json={})
        assert r.status_code == 409 and "disabled" in r.json()["detail"]


async def test_failed_summarization_gets_502_and_changes_nothing(tmp_path: Path) -> None:
    def respond(messages: list[BaseMessage]) -> str:
        if is_summarizer_call(messages):
            raise RuntimeError("summarizer provider down")
        return "a fine answer " * 5

    model = ScriptedChatModel(default=respond)
    config = gateway_config(
        tmp_path, {"summarization": {**MANUAL_ONLY["summarization"], "fallback": None}}
    )
    async with open_app(config, scripted_factory(model)) as (c, app):
        thread = await thread_with_turns(c, turns=3)
        before = (await c.get(f"/threads/{thread}/state")).json()
        transcript_before = (await c.get(f"/threads/{thread}/transcript")).json()
        r = await c.post(f"/threads/{thread}/compact", json={})
        assert r.status_code == 502
        assert "summarizer provider down" in r.json()["detail"]
        after = (await c.get(f"/threads/{thread}/state")).json()
        assert after["checkpoint"] == before["checkpoint"]
        assert after["values"] == before["values"]
        assert (await c.get(f"/threads/{thread}/compactions")).json() == []
        assert (await c.get(f"/threads/{thread}/transcript")).json() == transcript_before
        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert runs[0]["kind"] == "compact" and runs[0]["status"] == "error"
        assert await app.state.gateway.storage.get_thread_lock(thread) is None


async def test_the_transcript_records_visible_messages_once_and_skips_hidden_ones() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from foldwise.gateway._capture import TranscriptRecorder
    from foldwise.gateway.storage import open_storage

    async with open_storage("memory://") as storage:
        await storage.create_thread("t")
        recorder = TranscriptRecorder(storage, "t", "run-1")
        shown = HumanMessage("visible", id="m1")
        hidden = HumanMessage("framework data", id="m2", additional_kwargs={"hide_from_ui": True})
        assert await recorder.messages([shown, hidden]) == 1
        receipt = {"id": "cmp_1", "trigger": "tokens", "messages_removed": 3}
        await recorder.values(
            {"messages": [shown, AIMessage("reply", id="m3")], "compactions": [receipt]}
        )
        # The next run's recorder starts from the thread state: nothing is recorded twice.
        state = {"messages": [shown, AIMessage("reply", id="m3")], "compactions": [receipt]}
        again = TranscriptRecorder.from_values(storage, "t", "run-2", state)
        await again.values({**state, "messages": [*state["messages"], AIMessage("new", id="m4")]})
        entries = await storage.list_transcript("t")
        assert [(e.kind, e.message_id) for e in entries] == [
            ("message", "m1"),
            ("compaction", "compaction:cmp_1"),
            ("message", "m3"),
            ("message", "m4"),
        ]
        assert [r.receipt["id"] for r in await storage.list_receipts("t")] == ["cmp_1"]
