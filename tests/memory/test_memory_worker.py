"""`MemoryWorker`: applies the queue once in effect, retries, dead-letters, stops cleanly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldwise.memory import (
    MemoryManager,
    MemoryOutbox,
    MemoryWorker,
    namespace_for,
    open_backend,
)
from tests.memory.queue_support import (
    AsyncOnlyOutbox,
    Clock,
    FailingExtractor,
    GatedExtractor,
    memory_url,
    outbox_for,
    turn,
)
from tests.support.async_only_store import AsyncOnlyStore

ALICE = namespace_for("alice")


@pytest.fixture
def manager(queue_url: str) -> Iterator[MemoryManager]:
    memory = MemoryManager(open_backend(queue_url))
    memory.setup()
    yield memory
    memory.close()


def active_texts(manager: MemoryManager) -> list[str]:
    return sorted(f.text for f in manager.list(ALICE, status="active"))


def test_a_debounced_burst_is_one_extraction_with_supersession(
    manager: MemoryManager, outbox: MemoryOutbox, clock: Clock
) -> None:
    outbox.enqueue(ALICE, turn(1, "I live in Munich", answer="Noted."), thread_id="t1",
                   debounce_seconds=5)  # fmt: skip
    outbox.enqueue(ALICE, turn(2, "I moved to Berlin"), thread_id="t1", debounce_seconds=5)
    worker = MemoryWorker(manager, outbox, worker_id="w1")
    assert worker.run_once() == 0
    clock.advance(5)
    assert worker.run_once() == 1
    assert active_texts(manager) == ["I moved to Berlin"]
    assert worker.applied == 1 and outbox.status().counts == {"done": 2}
    events = manager.events(ALICE)
    assert {e.action for e in events} == {"add", "supersede"}
    assert all(e.key is not None and e.thread_id == "t1" for e in events)


def test_a_replayed_batch_is_deduplicated(
    manager: MemoryManager, outbox: MemoryOutbox, clock: Clock
) -> None:
    """A worker that applied but died before completing: the re-claim writes nothing new."""
    outbox.enqueue(ALICE, turn(1, "I live in Munich. I like tea"), thread_id="t1")
    (batch,) = outbox.claim("dead-worker", lease_seconds=10)
    manager.remember(ALICE, batch.messages(), key=batch.key)  # applied, never completed
    before = manager.list(ALICE)
    clock.advance(11)
    worker = MemoryWorker(manager, outbox, worker_id="w2")
    assert worker.run_once() == 1
    assert manager.list(ALICE) == before
    assert [e.action for e in manager.events(ALICE, limit=2)] == ["deduplicated"] * 2
    assert outbox.status().counts == {"done": 1}


def test_failures_back_off_then_dead_letter_with_the_error(
    queue_url: str, outbox: MemoryOutbox, clock: Clock
) -> None:
    extractor = FailingExtractor()
    manager = MemoryManager(open_backend(queue_url), extractor=extractor)
    manager.setup()
    try:
        outbox.enqueue(ALICE, turn(1, "I live in Munich"), thread_id="t1")
        worker = MemoryWorker(manager, outbox, max_attempts=3, backoff_seconds=4)
        assert worker.run_once() == 1
        assert outbox.status().counts == {"pending": 1}
        assert worker.run_once() == 0  # backing off
        clock.advance(4)
        assert worker.run_once() == 1
        clock.advance(7)
        assert worker.run_once() == 0  # the second retry waits 8 s
        clock.advance(1)
        assert worker.run_once() == 1
        status = outbox.status()
        assert status.counts == {"dead": 1}
        assert status.dead[0].attempts == 3
        assert status.dead[0].error == "ExtractionError: model answered garbage (call 3)"
        assert manager.list(ALICE) == []
    finally:
        manager.close()


def test_flush_applies_everything_now(manager: MemoryManager, outbox: MemoryOutbox) -> None:
    outbox.enqueue(ALICE, turn(1, "I live in Munich"), thread_id="t1", debounce_seconds=3600)
    outbox.enqueue(namespace_for("bob"), turn(2, "My name is Bob"), thread_id="t2",
                   debounce_seconds=3600)  # fmt: skip
    worker = MemoryWorker(manager, outbox)
    assert worker.flush(timeout=30) == 2
    assert active_texts(manager) == ["I live in Munich"]
    assert outbox.status().live == 0


def test_commit_check_applies_discards_or_waits(
    manager: MemoryManager, outbox: MemoryOutbox, clock: Clock
) -> None:
    verdicts: dict[str, bool | None] = {"r-ok": True, "r-failed": False, "r-open": None}
    asked: list[tuple[str, str]] = []

    def check(thread_id: str, ref: str) -> bool | None:
        asked.append((thread_id, ref))
        return verdicts[ref]

    worker = MemoryWorker(manager, outbox, commit_check=check, poll_seconds=2)
    outbox.enqueue(ALICE, turn(1, "I live in Munich"), thread_id="t1", origin="compaction",
                   commit_ref="r-failed")  # fmt: skip
    assert worker.run_once() == 1
    assert manager.list(ALICE) == []  # never committed: nothing remembered, row done
    assert outbox.status().counts == {"done": 1}
    outbox.enqueue(ALICE, turn(2, "I like tea"), thread_id="t2", origin="compaction",
                   commit_ref="r-open")  # fmt: skip
    assert worker.run_once() == 1
    assert outbox.status().counts == {"done": 1, "pending": 1}  # unknown: asked again later
    verdicts["r-open"] = True
    assert worker.run_once() == 0
    clock.advance(2)
    assert worker.run_once() == 1
    assert active_texts(manager) == ["I like tea"]
    assert asked == [("t1", "r-failed"), ("t2", "r-open"), ("t2", "r-open")]


def test_stop_finishes_the_batch_in_hand_and_leaves_the_rest_queued(
    queue_url: str, outbox: MemoryOutbox
) -> None:
    extractor = GatedExtractor()
    manager = MemoryManager(open_backend(queue_url), extractor=extractor)
    manager.setup()
    try:
        for n in range(4):
            outbox.enqueue(namespace_for(f"u{n}"), turn(n, "I live in Munich"), thread_id=f"t{n}")
        worker = MemoryWorker(manager, outbox, poll_seconds=0.05)
        worker.start()
        assert extractor.entered.wait(10)
        stopper = threading.Thread(target=worker.stop, kwargs={"timeout": 30})
        stopper.start()
        extractor.gate.set()
        stopper.join(30)
        assert not stopper.is_alive()
        assert outbox.status().counts == {"done": 1, "pending": 3}
    finally:
        manager.close()


async def test_astop_past_its_deadline_releases_the_batch(
    queue_url: str, outbox: MemoryOutbox
) -> None:
    asyncio.get_running_loop().set_debug(True)
    extractor = GatedExtractor()
    manager = MemoryManager(open_backend(queue_url), extractor=extractor)
    await manager.asetup()
    try:
        for n in range(3):
            await outbox.aenqueue(namespace_for(f"u{n}"), turn(n, "I like tea"), thread_id=f"t{n}")
        worker = MemoryWorker(manager, outbox, poll_seconds=0.05)
        await worker.astart()
        assert await asyncio.to_thread(extractor.entered.wait, 10)
        await worker.astop(deadline=0.1)
        status = await outbox.astatus()
        assert status.counts == {"pending": 3}  # nothing dropped, nothing left claimed
        extractor.gate.set()
        assert await worker.aflush(timeout=30) == 3
    finally:
        await manager.aclose()


async def test_the_async_worker_never_calls_sync_io(tmp_path: Path, clock: Clock) -> None:
    """Async-only doubles: a store backend whose sync calls raise, an outbox likewise."""
    asyncio.get_running_loop().set_debug(True)
    for url in memory_url("sqlite", tmp_path):
        store = AsyncOnlyStore()
        manager = MemoryManager(open_backend(None, store=store))
        inner = outbox_for(url, clock)
        outbox = AsyncOnlyOutbox(inner)
        worker = MemoryWorker(manager, outbox, poll_seconds=0.05)  # type: ignore[arg-type]
        await outbox.aenqueue(ALICE, turn(1, "I live in Munich"), thread_id="t1")
        await outbox.aenqueue(ALICE, turn(2, "I like tea"), thread_id="t1", debounce_seconds=5)
        assert await worker.arun_once() == 0
        clock.advance(5)
        await worker.astart()
        for _ in range(500):
            if (await outbox.astatus()).live == 0:
                break
            await asyncio.sleep(0.01)
        await worker.astop(deadline=5)
        facts = await manager.alist(ALICE, status="active")
        assert sorted(f.text for f in facts) == ["I like tea", "I live in Munich"]
        assert outbox.sync_calls == [] and store.sync_calls == []
        inner.close()


def test_wake_cuts_the_idle_wait(manager: MemoryManager, outbox: MemoryOutbox) -> None:
    worker = MemoryWorker(manager, outbox, poll_seconds=600)
    worker.start()
    try:
        outbox.enqueue(ALICE, turn(1, "I live in Munich"), thread_id="t1")
        worker.wake()
        for _ in range(2000):
            if outbox.status().live == 0:
                break
            threading.Event().wait(0.01)
        assert active_texts(manager) == ["I live in Munich"]  # long before a 600 s poll
    finally:
        assert worker.stop(timeout=30)


async def test_wake_reaches_the_async_task(manager: MemoryManager, outbox: MemoryOutbox) -> None:
    asyncio.get_running_loop().set_debug(True)
    worker = MemoryWorker(manager, outbox, poll_seconds=600)
    await worker.astart()
    try:
        await asyncio.sleep(0.05)  # the task is idle, waiting
        await outbox.aenqueue(ALICE, turn(1, "I like tea"), thread_id="t1")
        await asyncio.to_thread(worker.wake)  # from another thread, as a sync producer would
        for _ in range(2000):
            if (await outbox.astatus()).live == 0:
                break
            await asyncio.sleep(0.01)
        assert [f.text for f in await manager.alist(ALICE, status="active")] == ["I like tea"]
    finally:
        await worker.astop(deadline=5)
