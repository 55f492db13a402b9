"""`remember(..., key=)`: deterministic fact ids, deduplicated replays, and the decision log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from foldwise.memory import MemoryManager, namespace_for, open_backend
from foldwise.memory._remember import derived_fact_id
from tests.memory.test_cli_memory import _config, run
from tests.support.async_only_store import AsyncOnlyStore

ALICE = namespace_for("alice")
SLICE = [
    HumanMessage(content="I live in Munich", id="m1"),
    HumanMessage(content="I moved to Berlin. I like tea", id="m2"),
]


def test_keyed_facts_get_derived_ids_and_a_replay_writes_nothing(storage_url: str) -> None:
    manager = MemoryManager(open_backend(storage_url))
    manager.setup()
    try:
        first = manager.remember(ALICE, SLICE, key="k1")
        created = [d.fact_id for d in first if d.action in ("add", "supersede")]
        assert created and all(
            fact_id == derived_fact_id("k1", index)
            for index, fact_id in enumerate(d.fact_id for d in first)
        )
        before = manager.list(ALICE)
        replay = manager.remember(ALICE, SLICE, key="k1")
        assert [d.action for d in replay] == ["deduplicated"] * len(first)
        assert [d.fact_id for d in replay] == [d.fact_id for d in first]
        assert manager.list(ALICE) == before  # not even a reinforcement
        other = manager.remember(ALICE, SLICE, key="k2")  # another key: planned, not skipped
        assert "supersede" in {d.action for d in other}
        assert all(d.reason != "already_applied" for d in other)
    finally:
        manager.close()


def test_the_decision_log_survives_a_reopen_and_is_per_namespace(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    manager = MemoryManager(open_backend(url))
    manager.setup()
    manager.remember(ALICE, SLICE, key="k1")
    manager.add(namespace_for("bob"), "I live in Rome")
    manager.close()
    again = MemoryManager(open_backend(url))
    again.setup()
    try:
        events = again.events(ALICE)
        assert [(e.action, e.text) for e in events] == [  # newest first
            ("add", "I like tea"),
            ("supersede", "I moved to Berlin"),
            ("add", "I live in Munich"),
        ]
        assert {e.key for e in events} == {"k1"}
        assert all(e.namespace == ALICE and e.evidence for e in events)
        assert [e.text for e in again.events(namespace_for("bob"))] == ["I live in Rome"]
        assert len(again.events(ALICE, limit=1)) == 1
    finally:
        again.close()


def test_gate_refusals_are_logged_too(storage_url: str) -> None:
    manager = MemoryManager(open_backend(storage_url))
    manager.setup()
    try:
        decisions = manager.remember(
            ALICE, [HumanMessage(content="Remember that I need the report by Friday", id="m9")]
        )
        assert decisions and decisions[0].action == "rejected"
        (event,) = manager.events(ALICE)
        assert event.action == "rejected" and event.reason == decisions[0].reason
        assert event.evidence == ("m9",)
    finally:
        manager.close()


async def test_async_keyed_replay_uses_only_async_io() -> None:
    asyncio.get_running_loop().set_debug(True)
    store = AsyncOnlyStore()
    manager = MemoryManager(open_backend(None, store=store))
    await manager.aremember(ALICE, SLICE, key="k1")
    replay = await manager.aremember(ALICE, SLICE, key="k1")
    assert {d.action for d in replay} == {"deduplicated"}
    assert len(await manager.aevents(ALICE)) == 2 * len(replay)
    assert store.sync_calls == []


def test_bad_limit_names_the_field(storage_url: str) -> None:
    from foldwise.errors import MemoryInputError

    manager = MemoryManager(open_backend(storage_url))
    manager.setup()
    try:
        with pytest.raises(MemoryInputError, match="limit"):
            manager.events(ALICE, limit=0)
    finally:
        manager.close()


def test_cli_memory_log(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert run(cfg, "add", "I live in Munich", "--user", "alice")[0] == 0
    assert run(cfg, "add", "I moved to Berlin", "--user", "alice")[0] == 0
    code, out, _ = run(cfg, "log", "--user", "alice")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and "supersede" in lines[0] and "I moved to Berlin" in lines[0]
    assert "add" in lines[1] and "user.home_city" in lines[1]
    code, out, _ = run(cfg, "log", "--user", "alice", "--json", "--limit", "1")
    (event,) = json.loads(out)
    assert event["action"] == "supersede" and event["closed_ids"]
    assert run(cfg, "log", "--user", "carol")[1].strip() == "no decisions"
    assert run(cfg, "log", "--user", "alice", "--limit", "0")[0] == 2
