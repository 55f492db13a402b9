"""`ChannelPacker`: spliced checkpoint blobs are byte for byte the serializer's own.

The checkpoints come from real LangGraph runs (with a fork from an older checkpoint, and a
time-travel continuation of the original branch), recorded as the saver receives them, and
from adversarial sequences where two branches reuse a version string for different values.
The count of values spliced is measured (a packer that never splices fails), and the edges are
pinned: nesting at msgpack's limit is refused as the serializer refuses it, and a value changed
in place without an update is stored as LangGraph's in-memory saver stores it.
"""

from __future__ import annotations

import operator
import pickle
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import foldwise.gateway._checkpoint_pack as pack_module
from foldwise.gateway._checkpoint_pack import VALUES_KEY, ChannelPacker

SERDE = JsonPlusSerializer()


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]
    steps: Annotated[int, operator.add]
    note: str


class Recorder(InMemorySaver):
    """An in-memory saver that records every `put` as LangGraph made it."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[tuple[RunnableConfig, Checkpoint, ChannelVersions]] = []

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self.puts.append((config, checkpoint, dict(new_versions)))
        return super().put(config, checkpoint, metadata, new_versions)


def _graph(saver: Recorder) -> Any:
    def think(state: State) -> dict[str, Any]:
        return {"steps": 1}

    def answer(state: State) -> dict[str, Any]:
        text = f"re: {state['messages'][-1].content}"
        return {"messages": [AIMessage(text)], "steps": 1}

    def idle(state: State) -> None:
        return None

    builder = StateGraph(State)
    builder.add_node("think", think)
    builder.add_node("idle", idle)
    builder.add_node("answer", answer)
    builder.add_edge(START, "think")
    builder.add_edge("think", "idle")
    builder.add_edge("idle", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def _without_rows(checkpoint: Checkpoint, own_rows_from: int | None) -> tuple[Any, list[Any]]:
    """The checkpoint as the blob holds it when values of `own_rows_from` bytes get rows."""
    if own_rows_from is None:
        return checkpoint, []
    versions = checkpoint["channel_versions"]
    large = [
        (channel, value)
        for channel, value in checkpoint["channel_values"].items()
        if channel in versions and len(SERDE.dumps_typed(value)[1]) >= own_rows_from
    ]
    if not large:
        return checkpoint, []
    values = {k: v for k, v in checkpoint["channel_values"].items() if k not in dict(large)}
    refs = {channel: versions[channel] for channel, _ in large}
    return {**checkpoint, "channel_values": values, VALUES_KEY: refs}, large


def _replay(
    puts: list[tuple[RunnableConfig, Checkpoint, ChannelVersions]],
    own_rows_from: int | None = None,
    **kwargs: Any,
) -> int:
    """Pack every recorded checkpoint; assert each blob equals the serializer's.

    With `own_rows_from`, the blob is the serializer's of the checkpoint without its large
    values (listed under `VALUES_KEY`), and each row decodes to its value at its version.
    Returns how many channel values were spliced (not packed again).
    """
    packer = ChannelPacker(SERDE, **kwargs)
    packed = 0

    def counting(value: Any) -> bytes:
        nonlocal packed
        packed += 1
        return real(value)

    real, pack_module._packed_channel = pack_module._packed_channel, counting
    try:
        for config, checkpoint, new_versions in puts:
            configurable = config["configurable"]
            thread = (configurable["thread_id"], configurable.get("checkpoint_ns", ""))
            parent = configurable.get("checkpoint_id")
            result = packer.pack(
                thread, parent, checkpoint, new_versions, own_rows_from=own_rows_from
            )
            expected, large = _without_rows(checkpoint, own_rows_from)
            assert (result.type, result.blob) == SERDE.dumps_typed(expected)
            assert [row.channel for row in result.rows] == [channel for channel, _ in large]
            for row, (channel, value) in zip(result.rows, large, strict=True):
                assert row.version == str(checkpoint["channel_versions"][channel])
                assert SERDE.loads_typed((row.type, row.value)) == value
    finally:
        pack_module._packed_channel = real
    return sum(len(checkpoint["channel_values"]) for _, checkpoint, _ in puts) - packed


def test_blobs_of_real_runs_forks_and_time_travel_equal_the_serializers() -> None:
    saver = Recorder()
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    for turn in range(4):
        graph.invoke({"messages": [HumanMessage(f"turn {turn}")], "note": "n"}, config)
    history = list(graph.get_state_history(config))
    older = history[len(history) // 2].config
    forked = graph.update_state(older, {"messages": [HumanMessage("edited")], "note": "fork"})
    graph.invoke({"messages": [HumanMessage("on the fork")]}, forked)
    graph.invoke(None, history[3].config)  # time travel on the original branch
    other: RunnableConfig = {"configurable": {"thread_id": "t2"}}
    graph.invoke({"messages": [HumanMessage("other thread")]}, other)
    assert len(saver.puts) > 20
    assert _replay(saver.puts) > len(saver.puts)  # most steps reused most channels


def _checkpoint(id_: str, values: dict[str, Any], versions: dict[str, str]) -> Checkpoint:
    return {
        "v": 4,
        "id": id_,
        "ts": "2026-12-05T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {"node": dict(versions)},
        "updated_channels": None,
    }


def _config(parent: str | None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


def test_large_values_get_rows_and_the_rest_is_the_serializers_blob() -> None:
    saver = Recorder()
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    for turn in range(12):
        graph.invoke({"messages": [HumanMessage(f"turn {turn} " + "w" * 400)], "note": "n"}, config)
    history = list(graph.get_state_history(config))
    forked = graph.update_state(history[20].config, {"messages": [HumanMessage("edited")]})
    graph.invoke(None, forked)
    graph.invoke(None, history[7].config)  # time travel
    assert _replay(saver.puts, own_rows_from=2048) > len(saver.puts)
    rows = 0
    packer = ChannelPacker(SERDE)
    for put_config, checkpoint, new_versions in saver.puts:
        configurable = put_config["configurable"]
        thread = (configurable["thread_id"], configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        rows += len(packer.pack(thread, parent, checkpoint, new_versions, own_rows_from=2048).rows)
    assert 0 < rows < len(saver.puts)  # the messages grew past 2 KiB on the way


def test_a_delta_snapshot_and_a_value_without_version_stay_in_the_blob() -> None:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    values = {"doc": "x" * 100, "snap": _DeltaSnapshot(["y" * 100]), "loose": "z" * 100}
    checkpoint = _checkpoint("c1", values, {"doc": "1", "snap": "1"})
    checkpoint["channel_versions"].pop("loose", None)
    packed = ChannelPacker(SERDE).pack(("t", ""), None, checkpoint, {}, own_rows_from=50)
    assert [row.channel for row in packed.rows] == ["doc"]
    blob = SERDE.loads_typed((packed.type, packed.blob))
    assert set(blob["channel_values"]) == {"snap", "loose"} and blob[VALUES_KEY] == {"doc": "1"}


def test_a_version_reused_on_another_branch_is_packed_again() -> None:
    # Two branches both call their value of "doc" version "2" (int-style versions): the kept
    # bytes belong to the checkpoint packed last, so a child of the other branch packs anew.
    a1 = _checkpoint("a1", {"doc": "base"}, {"doc": "1"})
    a2 = _checkpoint("a2", {"doc": "branch A"}, {"doc": "2"})
    b2 = _checkpoint("b2", {"doc": "branch B"}, {"doc": "2"})
    a3 = _checkpoint("a3", {"doc": "branch A", "n": 1}, {"doc": "2", "n": "1"})
    puts = [
        (_config(None), a1, {"doc": "1"}),
        (_config("a1"), a2, {"doc": "2"}),
        (_config("a1"), b2, {"doc": "2"}),
        (_config("a2"), a3, {"n": "1"}),  # child of a2, packed after b2
    ]
    _replay(puts)


def test_other_serializers_and_refused_values_take_the_serializers_own_path() -> None:
    class Wrapped(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            type_, data = super().dumps_typed(obj)
            return type_, b"wrapped:" + data

    checkpoint = _checkpoint("c1", {"doc": "x"}, {"doc": "1"})
    packer = ChannelPacker(Wrapped())
    assert packer.dumps_typed(("t", ""), None, checkpoint, {})[1].startswith(b"wrapped:")
    large = _checkpoint("c3", {"doc": "x" * 100, "n": 1}, {"doc": "1", "n": "1"})
    packed = packer.pack(("t", ""), None, large, {}, own_rows_from=50)
    assert [(row.channel, row.version) for row in packed.rows] == [("doc", "1")]
    assert packed.rows[0].value == b"wrapped:" + SERDE.dumps_typed("x" * 100)[1]
    rest = {**large, "channel_values": {"n": 1}, VALUES_KEY: {"doc": "1"}}
    assert (packed.type, packed.blob) == Wrapped().dumps_typed(rest)

    refused = _checkpoint("c2", {"doc": "x", "big": 2**80}, {"doc": "1", "big": "1"})
    fallback = JsonPlusSerializer(pickle_fallback=True)
    packer = ChannelPacker(fallback)
    packer.dumps_typed(("t", ""), None, checkpoint, {"doc": "1"})
    type_, blob = packer.dumps_typed(("t", ""), "c1", refused, {"big": "1"})
    assert (type_, blob) == fallback.dumps_typed(refused) and type_ == "pickle"
    assert pickle.loads(blob)["channel_values"]["big"] == 2**80
    assert ("t", "") not in packer._kept


def test_kept_bytes_are_bounded_and_forgotten() -> None:
    packer = ChannelPacker(SERDE, max_bytes=3000)
    for n in range(5):
        thread = (f"t{n}", "")
        packer.dumps_typed(thread, None, _checkpoint("c", {"doc": "x" * 1000}, {"doc": "1"}), {})
    assert list(packer._kept) == [("t3", ""), ("t4", "")]
    assert packer._total == sum(packer._sizes.values()) <= 3000
    packer.forget_thread("t4")
    assert list(packer._kept) == [("t3", "")]
    huge = _checkpoint("c", {"doc": "x" * 5000}, {"doc": "1"})
    assert packer.dumps_typed(("t9", ""), None, huge, {}) == SERDE.dumps_typed(huge)
    assert ("t9", "") not in packer._kept


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_a_value_nested_past_the_limit_is_refused_as_the_serializer_refuses_it() -> None:
    # Packed on its own, a channel value had two levels more to spare than in the checkpoint:
    # the splice wrote a blob for a checkpoint the serializer refuses.
    fits = _checkpoint("c1", {"doc": _deep(253)}, {"doc": "1"})
    deep = _checkpoint("c2", {"doc": _deep(254)}, {"doc": "2"})
    packer = ChannelPacker(SERDE)
    assert packer.dumps_typed(("t", ""), None, fits, {"doc": "1"}) == SERDE.dumps_typed(fits)
    with pytest.raises(TypeError, match="Recursion limit"):
        SERDE.dumps_typed(deep)
    with pytest.raises(TypeError, match="Recursion limit"):
        packer.dumps_typed(("t", ""), "c1", deep, {"doc": "2"})
    fallback = JsonPlusSerializer(pickle_fallback=True)
    packed = ChannelPacker(fallback).dumps_typed(("t", ""), None, deep, {"doc": "2"})
    assert packed == fallback.dumps_typed(deep) and packed[0] == "pickle"


class _Log(TypedDict):
    log: list[str]
    steps: Annotated[int, operator.add]


class _PackingSaver(InMemorySaver):
    """An in-memory saver that also packs each checkpoint when it is put (as the SQLite one)."""

    def __init__(self) -> None:
        super().__init__()
        self.packer = ChannelPacker(SERDE)
        self.packed: list[tuple[tuple[str, bytes], tuple[str, bytes]]] = []

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread = (configurable["thread_id"], configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        spliced = self.packer.dumps_typed(thread, parent, checkpoint, new_versions)
        self.packed.append((spliced, SERDE.dumps_typed(checkpoint)))
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_value_changed_in_place_is_stored_as_langgraphs_in_memory_saver_stores_it() -> None:
    # The documented exception: a node that changes a channel value in place and returns no
    # update for it leaves its version, so its bytes from the step before are spliced.
    def grow(state: _Log) -> dict[str, Any]:
        state["log"].append("changed in place")
        return {"steps": 1}

    def after(state: _Log) -> dict[str, Any]:
        return {"steps": 1}

    builder = StateGraph(_Log)
    builder.add_node("grow", grow)
    builder.add_node("after", after)
    builder.add_edge(START, "grow")
    builder.add_edge("grow", "after")
    builder.add_edge("after", END)
    saver = _PackingSaver()
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    builder.compile(checkpointer=saver).invoke({"log": ["a"], "steps": 0}, config)
    spliced, whole = saver.packed[-1]
    assert SERDE.loads_typed(whole)["channel_values"]["log"] == ["a", "changed in place"]
    assert SERDE.loads_typed(spliced)["channel_values"]["log"] == ["a"]
    assert saver.get_tuple(config).checkpoint["channel_values"]["log"] == ["a"]  # type: ignore[union-attr]
