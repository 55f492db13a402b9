"""The memory write queue's rules on every outbox: SQLite, PostgreSQL and in-process."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from foldwise.errors import MemoryInputError
from foldwise.memory import (
    MemoryManager,
    MemoryOutbox,
    namespace_for,
    open_backend,
    open_outbox,
    outbox_key,
)
from tests.memory.queue_support import Clock, turn

ALICE = namespace_for("alice")
BOB = namespace_for("bob")


def test_enqueue_is_idempotent_by_key(outbox: MemoryOutbox) -> None:
    first = outbox.enqueue(ALICE, turn(1, "I live in Munich", answer="Noted."), thread_id="t1")
    again = outbox.enqueue(ALICE, turn(1, "I live in Munich", answer="Noted."), thread_id="t1")
    assert first.created and not again.created and first.key == again.key
    assert first.key == outbox_key(ALICE, "t1", "u1", "a1", "run")
    other_origin = outbox.enqueue(
        ALICE, turn(1, "I live in Munich"), thread_id="t1", origin="compaction"
    )
    assert other_origin.created
    assert outbox.status().counts == {"pending": 2}


def test_bad_enqueue_names_the_field_and_changes_nothing(outbox: MemoryOutbox) -> None:
    with pytest.raises(MemoryInputError, match=r"messages\[0\]\.id"):
        outbox.enqueue(ALICE, [turn(1, "x")[0].model_copy(update={"id": None})])
    with pytest.raises(MemoryInputError, match="origin"):
        outbox.enqueue(ALICE, turn(1, "x"), origin="other")  # type: ignore[arg-type]
    with pytest.raises(MemoryInputError, match="messages"):
        outbox.enqueue(ALICE, [])
    with pytest.raises(MemoryInputError, match="debounce_seconds"):
        outbox.enqueue(ALICE, turn(1, "x"), debounce_seconds=-1)
    with pytest.raises(MemoryInputError, match="namespace"):
        outbox.enqueue(("users", "a b"), turn(1, "x"))
    assert outbox.status().counts == {}


def test_debounce_coalesces_a_burst_into_one_claim(outbox: MemoryOutbox, clock: Clock) -> None:
    for n in range(3):
        outbox.enqueue(ALICE, turn(n, f"message {n}"), thread_id="t1", debounce_seconds=10)
        clock.advance(1)
    assert outbox.claim("w1") == []  # t+3: the first row is due at t+10, the last at t+12
    clock.advance(8)
    assert outbox.claim("w1") == []  # t+11: two of three due: the burst is still open
    clock.advance(1)
    (batch,) = outbox.claim("w1")
    assert [item.key for item in batch.items] == [
        outbox_key(ALICE, "t1", f"u{n}", f"u{n}", "run") for n in range(3)
    ]
    assert [m.id for m in batch.messages()] == ["u0", "u1", "u2"]
    assert batch.namespace == ALICE and batch.thread_id == "t1"
    assert outbox.status().counts == {"claimed": 3}


def test_debounce_is_per_thread(outbox: MemoryOutbox, clock: Clock) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1", debounce_seconds=5)
    outbox.enqueue(BOB, turn(2, "b"), thread_id="t2", debounce_seconds=60)
    clock.advance(6)
    batches = outbox.claim("w1", limit=5)
    assert [b.thread_id for b in batches] == ["t1"]


def test_one_batch_per_namespace_at_a_time(outbox: MemoryOutbox) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    outbox.enqueue(ALICE, turn(2, "b"), thread_id="t2")
    outbox.enqueue(BOB, turn(3, "c"), thread_id="t3")
    first = outbox.claim("w1", limit=5)
    assert sorted(b.thread_id or "" for b in first) == ["t1", "t3"]
    assert outbox.claim("w2", limit=5) == []  # alice's t2 waits for alice's t1
    alice = next(b for b in first if b.namespace == ALICE)
    assert outbox.complete(alice) == 1
    (second,) = outbox.claim("w2", limit=5)
    assert second.thread_id == "t2"


def test_lease_expiry_lets_another_worker_reclaim_the_same_batch(
    outbox: MemoryOutbox, clock: Clock
) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    outbox.enqueue(ALICE, turn(2, "b"), thread_id="t1")
    (held,) = outbox.claim("w1", lease_seconds=30)
    clock.advance(29)
    assert outbox.claim("w2", lease_seconds=30) == []
    outbox.enqueue(ALICE, turn(3, "c"), thread_id="t1")  # arrives while the batch is out
    clock.advance(2)
    (again,) = outbox.claim("w2", lease_seconds=30)
    assert again.key == held.key  # the same rows, so the same idempotent apply
    assert [i.id for i in again.items] == [i.id for i in held.items]
    assert outbox.complete(held) == 0  # the expired holder changes nothing
    assert outbox.complete(again) == 2
    (newer,) = outbox.claim("w2")
    assert [m.id for m in newer.messages()] == ["u3"]


def test_fail_backs_off_then_dead_letters_with_the_error(
    outbox: MemoryOutbox, clock: Clock
) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    (batch,) = outbox.claim("w1")
    assert outbox.fail(batch, "ExtractionError: boom 1", retry_in=10) == 1
    assert outbox.claim("w1") == []
    clock.advance(10)
    (batch,) = outbox.claim("w1")
    assert batch.attempts == 1
    assert outbox.fail(batch, "ExtractionError: boom 2", retry_in=None) == 1
    clock.advance(3600)
    assert outbox.claim("w1") == []
    status = outbox.status()
    assert status.counts == {"dead": 1}
    (letter,) = status.dead
    assert letter.attempts == 2 and letter.error == "ExtractionError: boom 2"
    assert letter.namespace == ALICE and letter.thread_id == "t1"


def test_a_failed_batch_is_retried_alone_before_newer_rows(
    outbox: MemoryOutbox, clock: Clock
) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    (batch,) = outbox.claim("w1")
    outbox.fail(batch, "boom", retry_in=5)
    outbox.enqueue(ALICE, turn(2, "b"), thread_id="t1")
    assert outbox.claim("w1") == []  # the retry blocks its thread until it is due
    clock.advance(5)
    (retry,) = outbox.claim("w1")
    assert retry.key == batch.key and [m.id for m in retry.messages()] == ["u1"]


def test_release_and_release_owned(outbox: MemoryOutbox, clock: Clock) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    (batch,) = outbox.claim("w1")
    assert outbox.release(batch, retry_in=3) == 1
    assert outbox.claim("w1") == []
    clock.advance(3)
    (batch,) = outbox.claim("w1")
    assert batch.attempts == 0
    assert outbox.release_owned("w2") == 0
    assert outbox.release_owned("w1") == 1
    (again,) = outbox.claim("w3")
    assert again.key == batch.key


def test_status_reports_the_oldest_live_age(outbox: MemoryOutbox, clock: Clock) -> None:
    assert outbox.status().oldest_pending_seconds is None
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1")
    clock.advance(7)
    outbox.enqueue(BOB, turn(2, "b"), thread_id="t2")
    status = outbox.status()
    assert status.oldest_pending_seconds == pytest.approx(7)
    assert status.live == 2


def test_ignore_debounce_claims_rows_not_yet_due(outbox: MemoryOutbox) -> None:
    outbox.enqueue(ALICE, turn(1, "a"), thread_id="t1", debounce_seconds=3600)
    assert outbox.claim("w1") == []
    (batch,) = outbox.claim("w1", ignore_debounce=True)
    assert batch.thread_id == "t1"


def test_two_workers_never_claim_the_same_row(storage_url: str) -> None:
    """Two connections (two outboxes), each in its own thread, race to drain 60 namespaces."""
    boxes = [open_outbox(storage_url) for _ in range(2)]
    for box in boxes:
        box.setup()
    try:
        for n in range(60):
            boxes[0].enqueue(namespace_for(f"user{n}"), turn(n, "x"), thread_id=f"t{n}")
        claimed: list[list[int]] = [[], []]
        barrier = threading.Barrier(2)

        def drain(index: int) -> None:
            box = boxes[index]
            barrier.wait()
            while batches := box.claim(f"w{index}", limit=3):
                for batch in batches:
                    claimed[index].extend(item.id for item in batch.items)
                    time.sleep(0.002)  # "apply" it, while the other worker claims
                    box.complete(batch)

        threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        every = claimed[0] + claimed[1]
        assert len(every) == len(set(every)) == 60
        assert all(claimed)  # both workers got work
        assert boxes[1].status().counts == {"done": 60}
    finally:
        for box in boxes:
            box.close()


def test_a_part_one_database_gains_the_queue_on_open(tmp_path: Path) -> None:
    """A memory file at migration 1 (part 1) is migrated to 2 by the next open, facts kept."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    manager = MemoryManager(open_backend(url))
    manager.setup()
    manager.add(ALICE, "I live in Munich")
    manager.close()
    conn = sqlite3.connect(tmp_path / "m.db")
    for table in ("memory_outbox", "memory_events", "memory_outbox_namespaces"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM memory_schema_migrations WHERE version = 2")
    conn.commit()
    conn.close()
    box = open_outbox(url)
    box.setup()
    try:
        assert box.enqueue(ALICE, turn(1, "I like tea"), thread_id="t1").created
    finally:
        box.close()
    again = MemoryManager(open_backend(url))
    again.setup()
    try:
        assert [f.text for f in again.list(ALICE)] == ["I live in Munich"]
        assert again.events(ALICE) == []  # the log starts with the upgrade
    finally:
        again.close()
