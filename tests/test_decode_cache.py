"""`OnceDecodedSerializer`: a large blob read twice in a row is decoded once, never shared twice."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from foldwise.gateway._decode_cache import OnceDecodedSerializer


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
    first, second, third = (serde.loads_typed(blob) for _ in range(3))
    assert len(decodes) == 2  # the first and the third read
    plain = JsonPlusSerializer().loads_typed(blob)
    for value in (first, second, third):
        assert value == plain


def test_each_reader_gets_its_own_containers(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer()
    blob = serde.dumps_typed(_checkpoint(100))
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
    serde.loads_typed(one)
    assert serde.loads_typed(other)["id"] == "cq"
    assert len(decodes) == 2


def test_what_is_kept_is_bounded(decodes: list[int]) -> None:
    serde = OnceDecodedSerializer(max_entries=2, max_bytes=10 * 1024 * 1024)
    blobs = [serde.dumps_typed({**_checkpoint(100), "id": f"c{i}"}) for i in range(3)]
    for blob in blobs:
        serde.loads_typed(blob)
    assert len(decodes) == 3
    serde.loads_typed(blobs[0])  # pushed out by the third: decoded again
    assert len(decodes) == 4
    serde.loads_typed(blobs[2])  # still kept
    assert len(decodes) == 4
    tight = OnceDecodedSerializer(max_bytes=len(blobs[0][1]) // 2)
    tight.loads_typed(blobs[0])
    tight.loads_typed(blobs[0])  # too large to keep
    assert len(decodes) == 6
