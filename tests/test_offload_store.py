"""One conformance suite for every `ArtifactStore` backend (filesystem and LangGraph store)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from foldwise.errors import ArtifactIdError, ArtifactNotFoundError, StorageError
from foldwise.offload import (
    MAX_ROW_CHARS,
    ArtifactStore,
    BaseArtifactStore,
    FilesystemArtifactStore,
    StoreArtifactStore,
    join_rows,
    make_artifact_id,
)


class Clock:
    """A settable clock (a fake, not a mock)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


StoreFactory = Callable[..., BaseArtifactStore]


@pytest.fixture(params=["filesystem", "langgraph-store"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    def factory(**kwargs: object) -> BaseArtifactStore:
        if request.param == "filesystem":
            return FilesystemArtifactStore(tmp_path / "artifacts", **kwargs)  # type: ignore[arg-type]
        # Small chunks so multi-chunk reads are exercised.
        return StoreArtifactStore(InMemoryStore(), chunk_chars=1000, **kwargs)  # type: ignore[arg-type]

    return factory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(make_store: StoreFactory, clock: Clock) -> BaseArtifactStore:
    return make_store(clock=clock)


def _all_pages(store: ArtifactStore, thread: str, artifact_id: str, **kwargs: int) -> str:
    rows = []
    offset: int | None = 0
    while offset is not None:
        page = store.read_page(thread, artifact_id, offset=offset, **kwargs)
        rows.extend(page.rows)
        offset = page.next_offset
    return join_rows(rows)


TEXTS = {
    "empty": "",
    "one-line": "hello",
    "trailing-newline": "a\nb\n",
    "crlf": "first\r\nsecond\r\n\r\nlast",
    "cjk": "上下文管理。" * 3000 + "\n終わり",
    "emoji": "😀🎉" * 2500,
    "nul-and-surrogate": "a\x00b\ud800c\n",
    "json": json.dumps({"items": [{"name": "café", "text": 'quote " and \\'}] * 500}),
    "huge-line": "x" * (MAX_ROW_CHARS * 3 + 7),
}


def test_backends_satisfy_the_contract(store: BaseArtifactStore) -> None:
    assert isinstance(store, ArtifactStore)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_round_trip_exact(store: BaseArtifactStore, name: str) -> None:
    text = TEXTS[name]
    ref = store.put("thread-1", text, source="tool_x", kind="tool")
    raw = text.encode("utf-8", "surrogatepass")
    assert ref.sha256 == hashlib.sha256(raw).hexdigest()
    assert ref.chars == len(text)
    assert ref.size_bytes == len(raw)
    assert ref.lines == text.count("\n") + 1
    assert store.get("thread-1", ref.artifact_id) == text
    assert _all_pages(store, "thread-1", ref.artifact_id, limit=7, max_chars=3000) == text


def test_ref_is_plain_data(store: BaseArtifactStore) -> None:
    ref = store.put("t", "some text\nmore", source="grep", kind="tool", meta={"tool_call_id": "c1"})
    data = ref.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["artifact_id"] == make_artifact_id("t", "some text\nmore")
    assert data["meta"] == {"tool_call_id": "c1"}
    assert data["preview"] == "some text"
    assert store.get_ref("t", ref.artifact_id) == ref


def test_identical_content_is_stored_once(store: BaseArtifactStore, clock: Clock) -> None:
    first = store.put("t", "same", source="a", kind="tool")
    clock.advance(seconds=5)
    second = store.put("t", "same", source="a", kind="tool")
    assert first.artifact_id == second.artifact_id
    assert second.created > first.created
    assert [r.artifact_id for r in store.list("t")] == [first.artifact_id]


def test_threads_are_isolated(store: BaseArtifactStore) -> None:
    ref = store.put("alice", "secret", source="a", kind="tool")
    other = store.put("bob", "secret", source="a", kind="tool")
    assert ref.artifact_id != other.artifact_id
    with pytest.raises(ArtifactNotFoundError):
        store.get("bob", ref.artifact_id)
    assert [r.artifact_id for r in store.list("bob")] == [other.artifact_id]


@pytest.mark.parametrize("thread", ["a.b/../c", "über thread", "../../etc", "x" * 100, "@abc"])
def test_unusual_thread_ids_are_mapped_not_used(store: BaseArtifactStore, thread: str) -> None:
    ref = store.put(thread, "text", source="a", kind="tool")
    assert store.get(thread, ref.artifact_id) == "text"
    assert store.list(thread)[0].thread_id == thread


@pytest.mark.parametrize("thread", ["", "x" * 5000])
def test_unusable_thread_ids_are_refused(store: BaseArtifactStore, thread: str) -> None:
    with pytest.raises(ArtifactIdError):
        store.put(thread, "text", source="a", kind="tool")


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..%2f..",
        "art_" + "0" * 23,
        "art_" + "0" * 25,
        "ART_" + "0" * 24,
        "art_" + "0" * 23 + "\n",
        "art_" + "０" * 24,
        "a" * 4096,
        "",
    ],
)
def test_foreign_ids_are_refused(store: BaseArtifactStore, bad: str) -> None:
    with pytest.raises(ArtifactIdError):
        store.get("t", bad)
    with pytest.raises(ArtifactIdError):
        store.read_page("t", bad)
    with pytest.raises(ArtifactIdError):
        store.search("t", bad, "x")
    with pytest.raises(ArtifactIdError):
        store.delete("t", bad)


def test_missing_artifact(store: BaseArtifactStore) -> None:
    with pytest.raises(ArtifactNotFoundError):
        store.get("t", "art_" + "a" * 24)
    assert store.delete("t", "art_" + "a" * 24) is False
    assert store.list("nobody") == []


def test_pages_are_bounded_and_wrap_long_lines(store: BaseArtifactStore) -> None:
    text = "short\n" + "y" * (MAX_ROW_CHARS * 2 + 10) + "\nend"
    ref = store.put("t", text, source="a", kind="tool")
    assert ref.rows == 5
    page = store.read_page("t", ref.artifact_id, offset=0, limit=200, max_chars=2500)
    assert [len(r.text) for r in page.rows] == [5, MAX_ROW_CHARS]
    assert page.next_offset == 2
    page = store.read_page("t", ref.artifact_id, offset=2, limit=2)
    assert [r.continuation for r in page.rows] == [True, True]
    assert page.next_offset == 4
    last = store.read_page("t", ref.artifact_id, offset=4)
    assert [r.text for r in last.rows] == ["end"]
    assert last.next_offset is None
    beyond = store.read_page("t", ref.artifact_id, offset=99)
    assert beyond.rows == ()


def test_search_plain_and_regex(store: BaseArtifactStore) -> None:
    text = "\n".join(f"line {i}" for i in range(500)) + "\nneedle at the end"
    ref = store.put("t", text, source="a", kind="tool")
    found = store.search("t", ref.artifact_id, "needle")
    assert [m.row for m in found.matches] == [500]
    assert found.complete
    regex = store.search("t", ref.artifact_id, r"line 4\d\d$", regex=True, max_matches=5)
    assert [m.row for m in regex.matches] == [400, 401, 402, 403, 404]
    assert regex.stopped_reason == "max_matches"
    with pytest.raises(ValueError, match="invalid regular expression"):
        store.search("t", ref.artifact_id, "([", regex=True)


def test_search_finds_a_match_across_a_row_wrap(store: BaseArtifactStore) -> None:
    text = "z" * (MAX_ROW_CHARS - 3) + "WRAPPED" + "z" * 100
    ref = store.put("t", text, source="a", kind="tool")
    assert [m.row for m in store.search("t", ref.artifact_id, "WRAPPED").matches] == [0]


def test_delete_and_delete_thread(store: BaseArtifactStore) -> None:
    a = store.put("t", "one", source="a", kind="tool")
    b = store.put("t", "two", source="a", kind="human")
    keep = store.put("u", "three", source="a", kind="tool")
    assert store.delete("t", a.artifact_id) is True
    with pytest.raises(ArtifactNotFoundError):
        store.get("t", a.artifact_id)
    removed = store.delete_thread("t")
    assert [r.artifact_id for r in removed] == [b.artifact_id]
    assert store.list("t") == []
    assert store.get("u", keep.artifact_id) == "three"


def test_quota_evicts_oldest_first(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock, max_bytes_per_thread=250)
    refs = []
    for i in range(4):
        refs.append(store.put("t", f"{i}" * 100, source="a", kind="tool"))
        clock.advance(seconds=1)
    assert [r.artifact_id for r in store.list("t")] == [refs[2].artifact_id, refs[3].artifact_id]
    with pytest.raises(StorageError, match="quota"):
        store.put("t", "x" * 251, source="a", kind="tool")


def test_gc_by_age_and_quota(store: BaseArtifactStore, clock: Clock) -> None:
    old = store.put("t", "old" * 10, source="a", kind="tool")
    clock.advance(days=10)
    mid = store.put("t", "mid" * 10, source="a", kind="tool")
    clock.advance(seconds=1)
    new = store.put("t", "new" * 10, source="a", kind="tool")
    other = store.put("u", "other", source="a", kind="tool")
    report = store.gc(now=clock.now, max_age=timedelta(days=5), max_bytes_per_thread=35)
    assert report.removed_ids == [old.artifact_id, mid.artifact_id]
    assert report.freed_bytes == 60
    assert report.threads_scanned == 2
    assert report.offload_removals() == [
        {"artifact_id": old.artifact_id, "removed": True},
        {"artifact_id": mid.artifact_id, "removed": True},
    ]
    assert [r.artifact_id for r in store.list("t")] == [new.artifact_id]
    assert store.get("u", other.artifact_id) == "other"
    clock.advance(days=30)
    report = store.gc(max_age=timedelta(days=5))
    assert set(report.removed_ids) == {new.artifact_id, other.artifact_id}
    assert store.gc().removed == ()


async def test_async_twins(store: BaseArtifactStore) -> None:
    ref = await store.aput("t", "alpha\nbeta\ngamma", source="a", kind="tool")
    assert await store.aget("t", ref.artifact_id) == "alpha\nbeta\ngamma"
    assert (await store.aget_ref("t", ref.artifact_id)).artifact_id == ref.artifact_id
    page = await store.aread_page("t", ref.artifact_id, offset=1, limit=1)
    assert [r.text for r in page.rows] == ["beta"]
    result = await store.asearch("t", ref.artifact_id, "gam")
    assert [m.row for m in result.matches] == [2]
    assert [r.artifact_id for r in await store.alist("t")] == [ref.artifact_id]
    assert await store.adelete("t", ref.artifact_id) is True
    await store.aput("t", "again", source="a", kind="tool")
    assert len(await store.adelete_thread("t")) == 1
    assert (await store.agc(max_age=timedelta(days=1))).removed == ()
    with pytest.raises(ArtifactIdError):
        await store.aget("t", "../../etc/passwd")
