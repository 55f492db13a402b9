"""`OnceDecodedSerializer`: a large blob read twice in a row is decoded once, never shared twice.

Only reads inside `keeping_decodes()` (the gateway's input check) keep what they decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from foldwise.bench._serve import open_app
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.gateway._decode_cache import OnceDecodedSerializer, keeping_decodes
from tests.support.gateway import gateway_config, user


def _checkpoint(turns: int) -> dict[str, Any]:
    messages = [
        m
        for i in range(turns)
        for m in (HumanMessage(f"q{i} " * 40, id=f"h{i}"), AIMessage(f"a{i} " * 40, id=f"a{i}"))
    ]
    return {
        "v": 4,
        "id": "cp",
        "channel_values": {"messages": messages, "summary_text": None},
        "channel_versions": {"messages": "1"},
        "versions_seen": {"model": {"messages": "1"}},
    }


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = JsonPlusSerializer.loads_typed

    def counting(self: Any, data: tuple[str, bytes]) -> Any:
        calls.append(len(data[1]))
        return original(self, data)

    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", counting)
    return calls


def test_the_next_identical_read_is_served_once_then_decoded_again(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    blob = serde.dumps_typed(_checkpoint(100))
    assert len(blob[1]) >= serde.min_bytes
    with keeping_decodes():
        first = serde.loads_typed(blob)
    second, third = serde.loads_typed(blob), serde.loads_typed(blob)
    assert len(decodes) == 2  # the first and the third read
    plain = JsonPlusSerializer().loads_typed(blob)
    for value in (first, second, third):
        assert value == plain


def test_each_reader_gets_its_own_containers(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    blob = serde.dumps_typed(_checkpoint(100))
    with keeping_decodes():
        first = serde.loads_typed(blob)
    first["channel_versions"]["messages"] = "2"
    first["channel_values"]["messages"].append(HumanMessage("extra", id="x"))
    first["versions_seen"]["model"]["messages"] = "9"
    second = serde.loads_typed(blob)
    assert len(decodes) == 1
    assert second["channel_versions"] == {"messages": "1"}
    assert len(second["channel_values"]["messages"]) == 200
    assert second["versions_seen"] == {"model": {"messages": "1"}}
    # The messages themselves are shared (LangGraph's and foldwise's reducers never change
    # a stored value in place).
    assert second["channel_values"]["messages"][0] is first["channel_values"]["messages"][0]


def test_small_blobs_and_other_types_are_always_decoded(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    small = serde.dumps_typed(_checkpoint(1))
    assert len(small[1]) < serde.min_bytes
    serde.loads_typed(small)
    serde.loads_typed(small)
    serde.loads_typed(("json", b'{"a": 1}'))
    serde.loads_typed(("json", b'{"a": 1}'))
    assert len(decodes) == 4


def test_different_bytes_of_the_same_length_are_never_reused(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    one = serde.dumps_typed(_checkpoint(100))
    other = serde.dumps_typed({**_checkpoint(100), "id": "cq"})
    assert len(one[1]) == len(other[1]) and one[1] != other[1]
    with keeping_decodes():
        serde.loads_typed(one)
    assert serde.loads_typed(other)["id"] == "cq"
    assert len(decodes) == 2


def test_what_is_kept_is_bounded(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer(max_entries=2, max_bytes=10 * 1024 * 1024)
    blobs = [serde.dumps_typed({**_checkpoint(100), "id": f"c{i}"}) for i in range(3)]
    with keeping_decodes():
        for blob in blobs:
            serde.loads_typed(blob)
    assert len(decodes) == 3
    serde.loads_typed(blobs[0])  # pushed out by the third: decoded again
    assert len(decodes) == 4
    serde.loads_typed(blobs[2])  # still kept
    assert len(decodes) == 4
    tight = OnceDecodedSerializer(max_bytes=len(blobs[0][1]) // 2)
    with keeping_decodes():
        tight.loads_typed(blobs[0])
    tight.loads_typed(blobs[0])  # too large to keep
    assert len(decodes) == 6


def test_reads_outside_keeping_decodes_are_never_kept(decodes: list[int]) -> None:
    """LangGraph's loop and `update_state` may change what they read: they never keep it."""
    serde = OnceDecodedSerializer()
    blob = serde.dumps_typed(_checkpoint(100))
    first = serde.loads_typed(blob)
    first["channel_values"]["messages"][0].content = "edited by a node"
    assert serde.loads_typed(blob)["channel_values"]["messages"][0].content.startswith("q0 ")
    assert len(decodes) == 2


def test_nested_containers_and_delta_snapshots_are_never_shared(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    log = {"day": {"items": ["item"] * 4000}}
    checkpoint = {**_checkpoint(1), "channel_values": {"log": log, "delta": _DeltaSnapshot(["b"])}}
    for blob in (serde.dumps_typed(checkpoint), serde.dumps_typed(_DeltaSnapshot([log]))):
        assert len(blob[1]) >= serde.min_bytes
        with keeping_decodes():
            first = serde.loads_typed(blob)
        values = first["channel_values"] if isinstance(first, dict) else {"log": first.value[0]}
        values["log"]["day"]["items"].append("added in place")
        for snapshot in values.values():
            if isinstance(snapshot, _DeltaSnapshot):
                snapshot.value.append("added in place")
        assert serde.loads_typed(blob) == serde.loads_typed(blob) != first
    assert len(decodes) == 4  # per blob: the keeper's read, then the read after the served one


def _log_by_turn(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    """An in-place reducer (harmless with a serializer that decodes every read)."""
    for key, items in right.items():
        left.setdefault(key, {"items": []})["items"].extend(items)
    return left


class _LogState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    log: Annotated[dict[str, Any], _log_by_turn]


def _editing_factory(request: AgentRequest) -> HostedAgent:
    """A hosted graph that changes what it read in place: a nested log and the first message."""

    def node(state: _LogState) -> dict[str, Any]:
        turn = len(state["messages"])
        first = state["messages"][0]
        first.content = f"{first.content} [seen {turn}]"
        return {"messages": [first, AIMessage("ok " * 400)], "log": {"turns": [turn]}}

    graph = StateGraph(_LogState)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return HostedAgent(graph.compile(checkpointer=request.checkpointer))


async def test_a_run_that_edits_its_state_in_place_never_changes_an_older_checkpoint(
    tmp_path: Path,
) -> None:
    """Was: after `GET /state`, the run's loop kept its decode of the head and changed it in
    place; `/history` then served the head's bytes with the next run's entries."""
    async with open_app(gateway_config(tmp_path), _editing_factory) as (client, _app):
        thread = (await client.post("/threads", json={})).json()["thread_id"]

        async def run(text: str) -> None:
            body = {"assistant_id": "agent", "input": user(text * 100)}
            response = await client.post(f"/threads/{thread}/runs/wait", json=body)
            assert response.status_code == 200, response.text

        for turn in range(12):
            await run(f"q{turn} ")
        head = (await client.get(f"/threads/{thread}/state")).json()
        await run("next ")
        history = (await client.post(f"/threads/{thread}/history", json={"limit": 5})).json()
        old = next(h for h in history if h["checkpoint"] == head["checkpoint"])
        assert old["values"]["log"] == head["values"]["log"]
        assert old["values"]["messages"] == head["values"]["messages"]
