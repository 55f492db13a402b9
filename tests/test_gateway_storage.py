"""One shared suite for `GatewayStorage`: in-memory SQLite, SQLite file and Postgres.

Postgres runs against 127.0.0.1:5432 (database `test`, user `postgres`, else `root`). Each
test gets its own schema `foldwise_test_<random>`, dropped afterwards. When Postgres is
unreachable its tests skip, unless `CI` is set: then they fail, because CI must run them.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest
from psycopg import sql

from foldwise.errors import StorageError, ThreadNotFoundError, UsageError
from foldwise.gateway.storage import (
    MIGRATIONS,
    GatewayStorage,
    GatewayStorageError,
    InvalidRunIdError,
    InvalidThreadIdError,
    PostgresGatewayStorage,
    RunExistsError,
    SqliteGatewayStorage,
    ThreadExistsError,
    TranscriptEvent,
    open_storage,
    validate_thread_id,
)

PG_USERS = ("postgres", "root")
PG_BASE = "postgresql://{user}@127.0.0.1:5432/test"


@functools.cache
def _probe_postgres() -> tuple[str | None, str]:
    errors = []
    for user in PG_USERS:
        dsn = PG_BASE.format(user=user)
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return dsn, ""
        except psycopg.Error as exc:
            errors.append(f"{user}: {str(exc).strip()}")
    return None, "PostgreSQL on 127.0.0.1:5432 (database test) unreachable: " + "; ".join(errors)


def _postgres_dsn() -> str:
    dsn, reason = _probe_postgres()
    if dsn is None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so Postgres tests must run)")
        pytest.skip(reason)
    return dsn


@dataclass
class Backend:
    """Opens storage instances on one database (one SQLite file or one Postgres schema)."""

    name: str
    url: str
    dsn: str = ""
    schema: str = ""
    path: Path | None = None
    opened: list[GatewayStorage] = field(default_factory=list)

    def new(self) -> GatewayStorage:
        storage = open_storage(self.url)
        self.opened.append(storage)
        return storage

    async def open(self) -> GatewayStorage:
        storage = self.new()
        await storage.setup()
        return storage

    async def raw(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run SQL behind the storage's back (shared backends only)."""
        if self.name == "postgres":
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await conn.execute(
                    sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema))
                )
                cursor = await conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
                return await cursor.fetchall() if cursor.description else []
        assert self.path is not None
        async with aiosqlite.connect(self.path) as conn:
            cursor = await conn.execute(statement, params)
            rows = list(await cursor.fetchall())
            await conn.commit()
            return rows

    async def aclose(self) -> None:
        for storage in self.opened:
            await storage.aclose()
        if self.name == "postgres":
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )


async def _make_backend(name: str, tmp_path: Path) -> Backend:
    if name == "memory":
        return Backend(name, "memory://")
    if name == "sqlite":
        path = tmp_path / "db" / "gateway.db"
        return Backend(name, f"sqlite:///{path}", path=path)
    dsn = _postgres_dsn()
    schema = f"foldwise_test_{uuid.uuid4().hex[:12]}"
    return Backend(name, f"{dsn}?schema={schema}", dsn=dsn, schema=schema)


PG = pytest.param("postgres", marks=pytest.mark.postgres)


@pytest.fixture(params=["memory", "sqlite", PG])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Any backend; each instance of `memory` is a separate database."""
    b = await _make_backend(request.param, tmp_path)
    try:
        yield b
    finally:
        await b.aclose()


@pytest.fixture(params=["sqlite", PG])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A backend whose instances share one database (two workers, or a restart)."""
    b = await _make_backend(request.param, tmp_path)
    try:
        yield b
    finally:
        await b.aclose()


@pytest.fixture
async def storage(backend: Backend) -> GatewayStorage:
    return await backend.open()


def msg(text: str, message_id: str | None = None, **extra: Any) -> TranscriptEvent:
    body = {"type": "human", "data": {"content": text, "id": message_id, **extra}}
    return TranscriptEvent(kind="message", message=body, message_id=message_id)


def assert_utc(moment: datetime) -> None:
    assert moment.tzinfo is not None
    assert moment.utcoffset() == timedelta(0)


# lifecycle and migrations ------------------------------------------------------------------


async def test_setup_is_idempotent_and_rerunnable(shared: Backend) -> None:
    first = await shared.open()
    await first.create_thread("t1", {"a": 1})
    await first.setup()  # same instance again
    second = await shared.open()  # another process on the same database
    assert await second.schema_version() == len(MIGRATIONS)
    rows = await shared.raw("SELECT version FROM schema_migrations ORDER BY version")
    assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
    thread = await second.get_thread("t1")
    assert thread is not None
    assert thread.metadata == {"a": 1}


async def test_concurrent_setup_on_a_fresh_database(shared: Backend) -> None:
    a, b, c = shared.new(), shared.new(), shared.new()
    await asyncio.gather(a.setup(), b.setup(), c.setup())
    assert [await s.schema_version() for s in (a, b, c)] == [len(MIGRATIONS)] * 3
    rows = await shared.raw("SELECT COUNT(*) FROM schema_migrations")
    assert rows[0][0] == len(MIGRATIONS)


async def test_database_newer_than_code_is_refused(shared: Backend) -> None:
    await shared.open()
    await shared.raw(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (999, "from the future", datetime.now(UTC).isoformat()),
    )
    with pytest.raises(GatewayStorageError, match="upgrade foldwise"):
        await shared.open()


async def test_async_with_and_double_close(backend: Backend) -> None:
    storage = backend.new()
    assert isinstance(storage, GatewayStorage)
    async with storage as opened:
        assert opened is storage
        await storage.ping()
        await storage.create_thread("t1")
    await storage.aclose()
    with pytest.raises(GatewayStorageError, match="not open"):
        await storage.get_thread("t1")


async def test_restart_keeps_threads_transcript_receipts_runs(shared: Backend) -> None:
    first = await shared.open()
    await first.create_thread("t1", {"owner": "ada"})
    await first.create_run("t1", "r1", "agent")
    await first.finish_run("r1", "success")
    await first.append_transcript("t1", [msg("hello", "m1"), msg("world", "m2")])
    await first.add_receipt("t1", {"reason": "manual", "tokens_before": 10}, run_id="r1")
    before = (
        await first.get_thread("t1"),
        await first.list_runs("t1"),
        await first.list_transcript("t1"),
        await first.list_receipts("t1"),
    )
    await first.aclose()

    second = await shared.open()
    after = (
        await second.get_thread("t1"),
        await second.list_runs("t1"),
        await second.list_transcript("t1"),
        await second.list_receipts("t1"),
    )
    assert after == before
    appended = await second.append_transcript("t1", [msg("again", "m3"), msg("dup", "m1")])
    assert [e.seq for e in appended] == [3]


# threads -----------------------------------------------------------------------------------


async def test_thread_create_get_update_delete(storage: GatewayStorage) -> None:
    created = await storage.create_thread("t1", {"user": "ada", "nested": {"x": 1, "y": 2}})
    assert created.thread_id == "t1"
    assert created.status == "idle"
    assert_utc(created.created_at)
    assert created.updated_at == created.created_at
    assert await storage.get_thread("t1") == created
    assert await storage.get_thread("missing") is None

    with pytest.raises(ThreadExistsError, match="t1"):
        await storage.create_thread("t1")

    updated = await storage.update_thread(
        "t1", metadata={"nested": {"x": 3}, "extra": None}, status="busy"
    )
    assert updated is not None
    # shallow merge: top-level keys replaced, others kept, null stored (not a deletion)
    assert updated.metadata == {"user": "ada", "nested": {"x": 3}, "extra": None}
    assert updated.status == "busy"
    assert updated.created_at == created.created_at
    assert updated.updated_at >= created.updated_at
    assert await storage.get_thread("t1") == updated

    only_status = await storage.update_thread("t1", status="error")
    assert only_status is not None
    assert only_status.metadata == updated.metadata
    assert await storage.update_thread("missing", status="idle") is None
    with pytest.raises(ValueError, match="status"):
        await storage.update_thread("t1", status="running")  # type: ignore[arg-type]

    assert await storage.delete_thread("t1") is True
    assert await storage.delete_thread("t1") is False
    assert await storage.get_thread("t1") is None


async def test_search_threads_filters_sorts_and_pages(storage: GatewayStorage) -> None:
    await storage.create_thread("t1", {"user": "ada", "tags": ["a", "b"], "flag": True})
    await storage.create_thread("t2", {"user": "bob", "tags": ["b"], "flag": 1, "n": {"k": 1}})
    await storage.create_thread("t3", {"user": "ada", "n": {"k": 1, "j": 2}})
    await storage.update_thread("t1", status="busy")

    async def ids(**kwargs: Any) -> list[str]:
        return [t.thread_id for t in await storage.search_threads(**kwargs)]

    assert await ids() == ["t3", "t2", "t1"]  # newest first
    assert await ids(sort_by="updated_at") == ["t1", "t3", "t2"]
    assert await ids(metadata={"user": "ada"}) == ["t3", "t1"]
    assert await ids(metadata={"user": "ada", "tags": ["a"]}) == ["t1"]
    assert await ids(metadata={"tags": ["b"]}) == ["t2", "t1"]
    assert await ids(metadata={"n": {"k": 1}}) == ["t3", "t2"]
    assert await ids(metadata={"flag": True}) == ["t1"]  # true is not 1
    assert await ids(metadata={"flag": 1}) == ["t2"]
    assert await ids(metadata={"user": "nobody"}) == []
    assert await ids(metadata={"x') OR '1'='1": 1}) == []  # keys are data, never SQL
    assert await ids(status="busy") == ["t1"]
    assert await ids(status="idle", metadata={"user": "ada"}) == ["t3"]
    assert await ids(limit=2) == ["t3", "t2"]
    assert await ids(limit=2, offset=2) == ["t1"]
    with pytest.raises(ValueError, match="limit"):
        await storage.search_threads(limit=0)
    with pytest.raises(ValueError, match="offset"):
        await storage.search_threads(offset=-1)


# runs --------------------------------------------------------------------------------------


async def test_runs_lifecycle(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    run = await storage.create_run("t1", "r1", "agent", metadata={"model": "stub"})
    assert (run.status, run.kind, run.error, run.metadata) == (
        "running",
        "run",
        None,
        {"model": "stub"},
    )
    assert_utc(run.created_at)
    with pytest.raises(RunExistsError, match="r1"):
        await storage.create_run("t1", "r1", "agent")
    with pytest.raises(ThreadNotFoundError, match="nope"):
        await storage.create_run("nope", "r2", "agent")

    finished = await storage.finish_run("r1", "error", "boom\x00!")
    assert finished is not None
    assert (finished.status, finished.error) == ("error", "boom\ufffd!")
    again = await storage.finish_run("r1", "success", None)  # already finished: unchanged
    assert again == finished
    assert await storage.get_run("r1") == finished
    assert await storage.finish_run("missing", "success") is None
    assert await storage.get_run("missing") is None
    with pytest.raises(ValueError, match="status"):
        await storage.finish_run("r1", "running")  # type: ignore[arg-type]

    compact = await storage.create_run("t1", "r2", "agent", "compact")
    assert [r.run_id for r in await storage.list_runs("t1")] == ["r2", "r1"]
    assert compact.kind == "compact"
    assert [r.run_id for r in await storage.list_runs("t1", limit=1, offset=1)] == ["r1"]
    with pytest.raises(ValueError, match="kind"):
        await storage.create_run("t1", "r3", "agent", "other")  # type: ignore[arg-type]


# transcript --------------------------------------------------------------------------------


async def test_transcript_append_and_paginate(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    when = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    events = [msg(f"m{i}", f"id-{i}") for i in range(5)]
    events.append(
        TranscriptEvent(
            kind="compaction", message={"summary": "s", "removed": 3}, run_id="r1", created_at=when
        )
    )
    stored = await storage.append_transcript("t1", events)
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5, 6]
    assert stored[-1].kind == "compaction"
    assert stored[-1].created_at == when
    assert stored[-1].run_id == "r1"
    assert stored[-1].message_id is None
    assert await storage.list_transcript("t1") == stored
    page = await storage.list_transcript("t1", after_seq=2, limit=2)
    assert [e.seq for e in page] == [3, 4]
    assert page[0].message == {"type": "human", "data": {"content": "m2", "id": "id-2"}}
    assert await storage.list_transcript("t1", after_seq=6) == []
    assert await storage.list_transcript("other") == []
    assert await storage.append_transcript("t1", []) == []
    with pytest.raises(ThreadNotFoundError):
        await storage.append_transcript("nope", [msg("x")])
    with pytest.raises(ValueError, match="after_seq"):
        await storage.list_transcript("t1", after_seq=-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        TranscriptEvent(kind="message", message={}, created_at=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="kind"):
        TranscriptEvent(kind="note", message={})  # type: ignore[arg-type]


async def test_transcript_message_id_is_idempotent(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    await storage.create_thread("t2")
    first = await storage.append_transcript("t1", [msg("a", "m1"), msg("b", "m2")])
    assert [e.seq for e in first] == [1, 2]
    retry = await storage.append_transcript(
        "t1", [msg("a", "m1"), msg("c", "m3"), msg("c again", "m3"), msg("no id")]
    )
    assert [(e.seq, e.message_id) for e in retry] == [(3, "m3"), (4, None)]
    assert await storage.append_transcript("t1", [msg("a", "m1")]) == []
    # ids are per thread
    assert [e.seq for e in await storage.append_transcript("t2", [msg("a", "m1")])] == [1]
    everything = await storage.list_transcript("t1")
    assert [e.message_id for e in everything] == ["m1", "m2", "m3", None]
    assert everything[0].message["data"]["content"] == "a"


async def _append_concurrently(stores: list[GatewayStorage], tasks: int, size: int) -> None:
    async def one(i: int) -> list[int]:
        store = stores[i % len(stores)]
        batch = [msg(f"{i}-{j}", f"m-{i}-{j}") for j in range(size)]
        return [e.seq for e in await store.append_transcript("t1", batch)]

    results = await asyncio.gather(*(one(i) for i in range(tasks)))
    for seqs in results:  # each batch is atomic: consecutive numbers
        assert seqs == list(range(seqs[0], seqs[0] + size))
    listed = await stores[0].list_transcript("t1", limit=1000)
    assert [e.seq for e in listed] == list(range(1, tasks * size + 1))
    assert len({e.message_id for e in listed}) == tasks * size
    assert sorted(s for seqs in results for s in seqs) == list(range(1, tasks * size + 1))


async def test_concurrent_appends_on_one_instance(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    await _append_concurrently([storage], tasks=20, size=3)


async def test_concurrent_appends_from_two_workers(shared: Backend) -> None:
    a, b = await shared.open(), await shared.open()
    await a.create_thread("t1")
    await _append_concurrently([a, b], tasks=20, size=3)


# receipts ----------------------------------------------------------------------------------


async def test_receipts_and_compaction_marker(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    await storage.append_transcript("t1", [msg("a", "m1")])
    records = [await storage.add_receipt("t1", {"n": i, "reason": "threshold"}) for i in range(3)]
    marker = TranscriptEvent(kind="compaction", message={"summary": "short"}, run_id="r9")
    with_marker = await storage.add_receipt("t1", {"n": 3}, run_id="r9", marker=marker)
    assert with_marker.run_id == "r9"
    listed = await storage.list_receipts("t1")
    assert listed == [*records, with_marker]
    assert [r.receipt["n"] for r in listed] == [0, 1, 2, 3]
    assert len({r.receipt_id for r in listed}) == 4
    assert_utc(listed[0].created_at)
    assert [r.receipt["n"] for r in await storage.list_receipts("t1", limit=2, offset=1)] == [1, 2]
    transcript = await storage.list_transcript("t1")
    assert [(e.seq, e.kind) for e in transcript] == [(1, "message"), (2, "compaction")]
    assert transcript[1].message == {"summary": "short"}
    with pytest.raises(ThreadNotFoundError):
        await storage.add_receipt("nope", {"n": 0})
    assert await storage.list_receipts("nope") == []


async def test_delete_thread_cascades(storage: GatewayStorage) -> None:
    for tid in ("t1", "t2"):
        await storage.create_thread(tid)
        await storage.create_run(tid, f"run-{tid}", "agent")
        await storage.append_transcript(tid, [msg("a", "m1"), msg("b", "m2")])
        await storage.add_receipt(tid, {"n": 1})
        assert await storage.acquire_thread_lock(tid, "h", "run", 60)
    assert await storage.delete_thread("t1") is True
    assert await storage.get_run("run-t1") is None
    assert await storage.list_runs("t1") == []
    assert await storage.list_transcript("t1") == []
    assert await storage.list_receipts("t1") == []
    assert await storage.get_thread_lock("t1") is None
    # the other thread is untouched
    assert len(await storage.list_transcript("t2")) == 2
    assert (lock := await storage.get_thread_lock("t2")) is not None
    assert lock.holder == "h"
    # the id can be reused from scratch
    await storage.create_thread("t1")
    assert [e.seq for e in await storage.append_transcript("t1", [msg("a", "m1")])] == [1]
    assert await storage.acquire_thread_lock("t1", "other", "run", 60)


# thread leases -----------------------------------------------------------------------------


async def test_lock_excludes_a_second_worker(shared: Backend) -> None:
    a, b = await shared.open(), await shared.open()
    await a.create_thread("t1")
    assert await a.acquire_thread_lock("t1", "run-a", "run", 60) is True
    assert await b.acquire_thread_lock("t1", "run-b", "compact", 60) is False
    assert await a.acquire_thread_lock("t1", "run-a", "run", 60) is False  # not re-entrant
    lock = await b.get_thread_lock("t1")
    assert lock is not None
    assert (lock.holder, lock.kind) == ("run-a", "run")
    assert_utc(lock.expires_at)
    assert lock.expires_at > lock.acquired_at
    assert await b.release_thread_lock("t1", "run-b") is False  # only the holder releases
    assert await b.renew_thread_lock("t1", "run-b", 60) is False
    assert await a.renew_thread_lock("t1", "run-a", 120) is True
    renewed = await b.get_thread_lock("t1")
    assert renewed is not None
    assert renewed.expires_at > lock.expires_at
    assert await a.release_thread_lock("t1", "run-a") is True
    assert await a.get_thread_lock("t1") is None
    assert await b.acquire_thread_lock("t1", "run-b", "compact", 60) is True
    with pytest.raises(ThreadNotFoundError):
        await b.acquire_thread_lock("nope", "run-b", "run", 60)


async def test_lock_race_has_exactly_one_winner(shared: Backend) -> None:
    a, b = await shared.open(), await shared.open()
    await a.create_thread("t1")
    results = await asyncio.gather(
        *(
            (a if i % 2 else b).acquire_thread_lock("t1", f"holder-{i}", "run", 60)
            for i in range(10)
        )
    )
    assert results.count(True) == 1
    lock = await a.get_thread_lock("t1")
    assert lock is not None
    assert lock.holder == f"holder-{results.index(True)}"


async def test_expired_lock_can_be_taken_over(shared: Backend) -> None:
    a, b = await shared.open(), await shared.open()
    await a.create_thread("t1")
    assert await a.acquire_thread_lock("t1", "run-a", "run", 0.05)
    await asyncio.sleep(0.2)  # well past the lease; the database decides expiry
    assert await b.get_thread_lock("t1") is None
    assert await b.acquire_thread_lock("t1", "run-b", "run", 60) is True
    assert await a.renew_thread_lock("t1", "run-a", 60) is False  # lost it
    assert await a.release_thread_lock("t1", "run-a") is False
    lock = await a.get_thread_lock("t1")
    assert lock is not None
    assert lock.holder == "run-b"


async def test_lock_argument_validation(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="ttl_seconds"):
            await storage.acquire_thread_lock("t1", "h", "run", ttl)
    with pytest.raises(ValueError, match="holder"):
        await storage.acquire_thread_lock("t1", "", "run", 1)
    with pytest.raises(ValueError, match="kind"):
        await storage.acquire_thread_lock("t1", "h", "", 1)


# validation --------------------------------------------------------------------------------

BAD_IDS: list[Any] = [
    "",
    "a b",
    "../etc/passwd",
    "t;DROP TABLE threads",
    "x" * 129,
    "id\n",
    "ünï",
    "a\x00b",
    "%2e%2e",
    None,
    123,
]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
async def test_invalid_thread_ids_are_refused_before_sql(bad: Any) -> None:
    # A storage that was never opened: reaching SQL would raise "not open" instead.
    storage = SqliteGatewayStorage(":memory:")
    calls = [
        storage.create_thread(bad),
        storage.get_thread(bad),
        storage.update_thread(bad, status="idle"),
        storage.delete_thread(bad),
        storage.create_run(bad, "r1", "agent"),
        storage.list_runs(bad),
        storage.append_transcript(bad, [msg("x")]),
        storage.list_transcript(bad),
        storage.add_receipt(bad, {}),
        storage.list_receipts(bad),
        storage.acquire_thread_lock(bad, "h", "run", 1),
        storage.renew_thread_lock(bad, "h", 1),
        storage.release_thread_lock(bad, "h"),
        storage.get_thread_lock(bad),
    ]
    for call in calls:
        with pytest.raises(InvalidThreadIdError) as info:
            await call
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, UsageError)
        assert repr(bad)[:20] in str(info.value)
    for run_call in (storage.get_run(bad), storage.finish_run(bad, "success")):
        with pytest.raises(InvalidRunIdError):
            await run_call


async def test_invalid_ids_are_refused_by_every_backend(storage: GatewayStorage) -> None:
    with pytest.raises(InvalidThreadIdError, match="thread id"):
        await storage.create_thread("x' OR '1'='1")
    await storage.create_thread("t1")
    with pytest.raises(InvalidRunIdError, match="run id"):
        await storage.create_run("t1", "../r", "agent")
    with pytest.raises(InvalidRunIdError):
        await storage.append_transcript(
            "t1", [TranscriptEvent(kind="message", message={}, run_id="bad id")]
        )
    assert await storage.search_threads() != []


def test_valid_thread_ids() -> None:
    for good in (str(uuid.uuid4()), "a", "A-z_0-9", "x" * 128, str(uuid.uuid4()).upper()):
        assert validate_thread_id(good) == good


# JSON and text round trips -----------------------------------------------------------------

UNICODE_DOC: dict[str, Any] = {
    "cjk": "压缩上下文 コンテキスト 컨텍스트",
    "emoji": "🧭🚀 family: 👨‍👩‍👧",
    "rtl": "שלום مرحبا",
    "escapes": 'quote " backslash \\ newline \n tab \t </script> &amp;',
    "ключ": ["список", {"вложенный": True}],
    # Realistic numbers; Postgres jsonb would return 1.5e300 as an int (see docs/storage.md).
    "numbers": [0, -1, 2**63, 0.1, 1.5e-7, 12345.678, -2.5],
    "flags": [True, False, None],
    "empty": {"list": [], "dict": {}, "str": ""},
}


async def test_unicode_and_json_round_trip(storage: GatewayStorage) -> None:
    created = await storage.create_thread("t1", UNICODE_DOC)
    assert created.metadata == UNICODE_DOC
    fetched = await storage.get_thread("t1")
    assert fetched is not None
    assert fetched.metadata == UNICODE_DOC
    assert [
        t.thread_id for t in await storage.search_threads(metadata={"cjk": UNICODE_DOC["cjk"]})
    ] == ["t1"]
    event = TranscriptEvent(kind="message", message=UNICODE_DOC, message_id="💬-1")
    stored = await storage.append_transcript("t1", [event])
    assert stored[0].message == UNICODE_DOC
    listed = await storage.list_transcript("t1")
    assert listed[0].message == UNICODE_DOC
    assert listed[0].message_id == "💬-1"
    receipt = await storage.add_receipt("t1", UNICODE_DOC)
    assert (await storage.list_receipts("t1"))[0].receipt == UNICODE_DOC == receipt.receipt


async def test_nul_and_lone_surrogates_are_replaced_the_same_everywhere(
    storage: GatewayStorage,
) -> None:
    doc = {"k\x00ey": "a\x00b", "s": "x\ud800y", "list": ["\x00"]}
    expected = {"k\ufffdey": "a\ufffdb", "s": "x\ufffdy", "list": ["\ufffd"]}
    created = await storage.create_thread("t1", doc)
    assert created.metadata == expected
    assert (await storage.get_thread("t1")).metadata == expected  # type: ignore[union-attr]
    [entry] = await storage.append_transcript(
        "t1", [TranscriptEvent(kind="message", message=doc, message_id="m\x00")]
    )
    assert entry.message == expected
    assert entry.message_id == "m\ufffd"
    assert (await storage.list_transcript("t1"))[0] == entry
    assert await storage.append_transcript("t1", [msg("again", "m\x00")]) == []


async def test_unstorable_json_is_refused_before_sql(storage: GatewayStorage) -> None:
    with pytest.raises(ValueError, match="JSON"):
        await storage.create_thread("t1", {"x": float("nan")})
    with pytest.raises(TypeError):
        await storage.create_thread("t1", {"x": object()})
    assert await storage.get_thread("t1") is None


# errors from the database ------------------------------------------------------------------


async def test_database_errors_are_wrapped_with_the_thread_id(shared: Backend) -> None:
    storage = await shared.open()
    await storage.create_thread("t1")
    await shared.raw("DROP TABLE receipts")
    with pytest.raises(GatewayStorageError) as info:
        await storage.list_receipts("t1")
    assert isinstance(info.value, StorageError)
    assert info.value.thread_id == "t1"
    assert info.value.operation == "list_receipts"
    assert "t1" in str(info.value)
    # the connection is still usable afterwards
    assert await storage.get_thread("t1") is not None


async def test_unreachable_postgres_raises_storage_error() -> None:
    storage = PostgresGatewayStorage(
        "postgresql://postgres@127.0.0.1:1/test", schema="nowhere", connect_timeout=0.5
    )
    with pytest.raises(GatewayStorageError, match="setup"):
        await storage.setup()
    await storage.aclose()


# open_storage ------------------------------------------------------------------------------


def test_open_storage_urls(tmp_path: Path) -> None:
    memory = open_storage("memory://")
    assert isinstance(memory, SqliteGatewayStorage)
    assert memory.path == ":memory:"
    assert open_storage("sqlite:///:memory:").path == ":memory:"  # type: ignore[attr-defined]
    assert open_storage("sqlite:///rel/dir/x.db").path == "rel/dir/x.db"  # type: ignore[attr-defined]
    assert open_storage(f"sqlite:///{tmp_path}/x.db").path == f"{tmp_path}/x.db"  # type: ignore[attr-defined]
    for url, schema in (
        ("postgresql://u@h/db", "foldwise"),
        ("postgres://u@h/db", "foldwise"),
        ("postgresql+psycopg://u:pw@h:5432/db?schema=tenant_a&sslmode=disable", "tenant_a"),
    ):
        pg = open_storage(url)
        assert isinstance(pg, PostgresGatewayStorage)
        assert pg.schema == schema
    assert open_storage("postgresql://u@h/db", schema="other").schema == "other"  # type: ignore[attr-defined]
    for bad in ("mysql://u:secret@h/db", "sqlite://host/x.db", "sqlite:///", "nonsense"):
        with pytest.raises(ValueError) as info:
            open_storage(bad)
        assert "secret" not in str(info.value)
    with pytest.raises(ValueError, match="schema"):
        open_storage("postgresql://u@h/db?schema=bad-name")


async def test_sqlite_relative_url_creates_parent_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_storage("sqlite:///nested/dir/gateway.db") as storage:
        await storage.create_thread("t1")
    db = tmp_path / "nested" / "dir" / "gateway.db"
    assert db.is_file()
    async with aiosqlite.connect(db) as conn, conn.execute("PRAGMA journal_mode") as cursor:
        assert (await cursor.fetchone())[0] == "wal"  # type: ignore[index]


# overview reads (thread list, backward paging, model calls, origins) -----------------------


def ai(text: str, message_id: str, input_tokens: int | None = None) -> TranscriptEvent:
    data: dict[str, Any] = {"content": text, "id": message_id}
    if input_tokens is not None:
        data["usage_metadata"] = {"input_tokens": input_tokens, "output_tokens": 5}
    return TranscriptEvent(
        kind="message", message={"type": "ai", "data": data}, message_id=message_id
    )


def marker(receipt_id: str, tokens_after: int, archive_id: str | None = None) -> TranscriptEvent:
    body = {"type": "compaction", "receipt_id": receipt_id, "tokens_after": tokens_after}
    if archive_id is not None:
        body["archive_id"] = archive_id
    return TranscriptEvent(kind="compaction", message=body, message_id=f"compaction:{receipt_id}")


async def test_transcript_pages_backwards_and_counts(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    await storage.append_transcript("t1", [msg(f"m{i}", f"id-{i}") for i in range(7)])
    await storage.append_transcript("t1", [marker("c1", 10)])
    page = await storage.list_transcript("t1", before_seq=8, limit=3)
    assert [e.seq for e in page] == [5, 6, 7]  # the newest three before 8, oldest first
    assert [e.seq for e in await storage.list_transcript("t1", before_seq=3, limit=5)] == [1, 2]
    assert await storage.list_transcript("t1", before_seq=1) == []
    assert [e.seq for e in await storage.list_transcript("t1", kind="compaction")] == [8]
    assert [e.seq for e in await storage.list_transcript("t1", after_seq=2, before_seq=5)] == [
        3,
        4,
    ]
    assert await storage.count_transcript("t1") == 8
    assert await storage.count_transcript("other") == 0
    with pytest.raises(ValueError, match="before_seq"):
        await storage.list_transcript("t1", before_seq=0)
    with pytest.raises(ValueError, match="kind"):
        await storage.list_transcript("t1", kind="note")  # type: ignore[arg-type]


async def test_model_calls_are_the_newest_ai_messages_with_usage(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    await storage.append_transcript(
        "t1",
        [
            msg("q1", "h1"),
            ai("a1", "a1", 100),
            ai("no usage", "a2"),
            marker("c1", 40),
            msg("q2", "h2"),
            ai("a3", "a3", 70),
            ai("a4", "a4", 90),
        ],
    )
    calls = await storage.list_model_calls("t1", limit=2)
    assert [e.message_id for e in calls] == ["a3", "a4"]
    assert [e.message_id for e in await storage.list_model_calls("t1")] == ["a1", "a3", "a4"]
    with pytest.raises(ValueError, match="limit"):
        await storage.list_model_calls("t1", limit=0)


async def test_thread_activity_titles_counts_and_context(storage: GatewayStorage) -> None:
    await storage.create_thread("plain", owner="ada")
    await storage.append_transcript(
        "plain", [ai("greeting first", "g0"), msg("x" * 300, "h1"), ai("a", "a1", 120)]
    )
    await storage.create_thread("blocks", owner="ada")
    blocks = {"type": "human", "data": {"content": [{"type": "text", "text": "Block title"}]}}
    await storage.append_transcript(
        "blocks",
        [
            TranscriptEvent(kind="message", message=blocks, message_id="b1"),
            ai("a", "a1", 500),
            marker("c1", 80),
        ],
    )
    await storage.create_thread("empty", owner="ada")
    await storage.create_thread("theirs", owner="bob")
    page = await storage.thread_activity(owner="ada", limit=10)
    by_id = {a.thread.thread_id: a for a in page}
    assert set(by_id) == {"plain", "blocks", "empty"}
    assert [a.thread.thread_id for a in page] == ["empty", "blocks", "plain"]  # newest first
    plain, blocked, empty = by_id["plain"], by_id["blocks"], by_id["empty"]
    assert plain.title == "x" * 120
    assert (plain.message_count, plain.compaction_count) == (3, 0)
    assert (plain.context_tokens, plain.context_source) == (120, "call")
    assert blocked.title == "Block title"
    assert (blocked.message_count, blocked.compaction_count) == (2, 1)
    assert (blocked.context_tokens, blocked.context_source) == (80, "compaction")
    assert (empty.title, empty.message_count, empty.context_tokens) == ("", 0, None)
    assert empty.context_source is None
    # a later call supersedes the compaction
    await storage.append_transcript("blocks", [ai("b", "a2", 150)])
    (again,) = [
        a for a in await storage.thread_activity(owner="ada") if a.thread.thread_id == "blocks"
    ]
    assert (again.context_tokens, again.context_source) == (150, "call")
    # paging
    first = await storage.thread_activity(owner="ada", limit=2)
    rest = await storage.thread_activity(owner="ada", limit=2, offset=2)
    assert [a.thread.thread_id for a in first + rest] == [a.thread.thread_id for a in page]


async def test_thread_activity_query_matches_id_title_and_metadata(
    storage: GatewayStorage,
) -> None:
    await storage.create_thread("alpha-1", {"project": "Apollo", "n": 42}, owner="ada")
    await storage.create_thread("beta_2", {"project": "Gemini"}, owner="ada")
    await storage.append_transcript("beta_2", [msg("Where is the 50% DISCOUNT?", "h1")])
    await storage.create_thread("gamma", {"note": "x"}, owner="ada")
    await storage.create_thread("apollo-bob", {"project": "apollo"}, owner="bob")

    async def ids(query: str) -> set[str]:
        found = await storage.thread_activity(owner="ada", query=query)
        return {a.thread.thread_id for a in found}

    assert await ids("ALPHA") == {"alpha-1"}  # thread id, any case
    assert await ids("discount") == {"beta_2"}  # title
    assert await ids("apollo") == {"alpha-1"}  # metadata value (bob's thread stays hidden)
    assert await ids("42") == {"alpha-1"}  # a non-string value
    assert await ids("project") == set()  # keys are not values
    assert await ids("50%") == {"beta_2"}  # LIKE wildcards are literal
    assert await ids("a_2") == {"beta_2"}
    assert await ids("%") == {"beta_2"}
    assert await ids("_") == {"beta_2"}
    assert await ids("\\") == set()
    assert await ids("") == {"alpha-1", "beta_2", "gamma"}
    with pytest.raises(ValueError, match="query"):
        await storage.thread_activity(owner="ada", query="q" * 201)


async def test_locate_transcript_by_message_call_and_archive(storage: GatewayStorage) -> None:
    await storage.create_thread("t1")
    tool = {"type": "tool", "data": {"content": "big", "tool_call_id": "call-1", "id": "tm1"}}
    await storage.append_transcript(
        "t1",
        [
            msg("paste", "h1"),
            TranscriptEvent(kind="message", message=tool, message_id="tm1"),
            marker("c1", 10, archive_id="art_x"),
        ],
    )
    found = await storage.locate_transcript(
        "t1", message_ids=["h1", "missing"], tool_call_ids=["call-1"], archive_ids=["art_x"]
    )
    assert [(f.seq, f.kind, f.message_id) for f in found] == [
        (1, "message", "h1"),
        (2, "message", "tm1"),
        (3, "compaction", "compaction:c1"),
    ]
    assert found[1].tool_call_id == "call-1" and found[2].archive_id == "art_x"
    assert await storage.locate_transcript("t1") == []
    assert await storage.locate_transcript("other", message_ids=["h1"]) == []
