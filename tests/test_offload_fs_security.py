"""The filesystem store never reads, creates or replaces anything outside its root."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain.tools import ToolRuntime

from foldwise.errors import ArtifactIdError, StorageError
from foldwise.offload import FilesystemArtifactStore, make_artifact_id, offload_tools, thread_key

SECRET = "TOP-SECRET-CONTENT-OUTSIDE-THE-ROOT"


def _snapshot(base: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry under `base`: kind, mode and content (files) or link target (symlinks)."""
    seen: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            rel = str(path.relative_to(base))
            info = path.lstat()
            if path.is_symlink():
                seen[rel] = ("link", info.st_mode, os.readlink(path))
            elif path.is_dir():
                seen[rel] = ("dir", info.st_mode, "")
            else:
                seen[rel] = ("file", info.st_mode, path.read_bytes())
    return seen


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET)
    root.mkdir()
    return tmp_path, root, outside


def _runtime(thread: str) -> ToolRuntime:
    return ToolRuntime(
        state={},
        context=None,
        config={"configurable": {"thread_id": thread}},
        stream_writer=lambda _chunk: None,
        tool_call_id="call-1",
        store=None,
    )


HOSTILE_IDS = [
    "../../etc/passwd",
    "/etc/passwd",
    "..%2f..",
    "..\\..\\x",
    "art_../../../outside/passwd",
    "art_" + "0" * 24 + "/../../outside/passwd",
    "art_" + "0" * 24 + "\x00",
    "．．／．．",
    "a" * 4096,
    "",
]


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_touch_nothing(layout: tuple[Path, Path, Path], bad: str) -> None:
    base, root, _ = layout
    store = FilesystemArtifactStore(root)
    store.put("t1", "legit", source="a", kind="tool")
    before = _snapshot(base)
    read, search = offload_tools(store)
    for call in (
        lambda: read.invoke({"artifact_id": bad, "runtime": _runtime("t1")}),
        lambda: search.invoke({"artifact_id": bad, "pattern": "S", "runtime": _runtime("t1")}),
    ):
        out = call()
        assert out.startswith("Error:")
        assert SECRET not in out
    for method in (store.get, store.read_page, store.delete):
        with pytest.raises(ArtifactIdError):
            method("t1", bad)
    assert _snapshot(base) == before


def test_symlinked_thread_folder_is_refused(layout: tuple[Path, Path, Path]) -> None:
    base, root, outside = layout
    store = FilesystemArtifactStore(root)
    (root / thread_key("victim")).symlink_to(outside, target_is_directory=True)
    # An artifact "file" placed where the link points, to prove reads do not follow it.
    planted = make_artifact_id("victim", SECRET)
    (outside / f"{planted}.txt").write_text(SECRET)
    (outside / f"{planted}.json").write_text(json.dumps({"artifact_id": planted}))
    before = _snapshot(base)
    with pytest.raises(StorageError, match="not a real directory"):
        store.put("victim", "new content", source="a", kind="tool")
    with pytest.raises(StorageError):
        store.get("victim", planted)
    with pytest.raises(StorageError):
        store.list("victim")
    read, _ = offload_tools(store)
    out = read.invoke({"artifact_id": planted, "runtime": _runtime("victim")})
    assert out.startswith("Error:") and SECRET not in out
    store.delete_thread("other")  # unrelated thread: fine
    report = store.gc(max_age=timedelta(days=0.001), now=datetime.now(UTC) + timedelta(days=9))
    assert report.removed == ()
    assert _snapshot(base) == before


def test_symlinked_artifact_files_are_refused(layout: tuple[Path, Path, Path]) -> None:
    base, root, outside = layout
    store = FilesystemArtifactStore(root)
    ref = store.put("t1", "original", source="a", kind="tool")
    folder = root / thread_key("t1")
    (folder / f"{ref.artifact_id}.txt").unlink()
    (folder / f"{ref.artifact_id}.txt").symlink_to(outside / "passwd")
    before = _snapshot(base)
    with pytest.raises(StorageError, match="symlink"):
        store.get("t1", ref.artifact_id)
    read, search = offload_tools(store)
    for out in (
        read.invoke({"artifact_id": ref.artifact_id, "runtime": _runtime("t1")}),
        search.invoke({"artifact_id": ref.artifact_id, "pattern": "S", "runtime": _runtime("t1")}),
    ):
        assert out.startswith("Error:") and SECRET not in out
    assert _snapshot(base) == before
    # Deleting removes the link itself, never its target.
    assert store.delete("t1", ref.artifact_id)
    assert (outside / "passwd").read_text() == SECRET


def test_symlinked_sidecar_is_refused(layout: tuple[Path, Path, Path]) -> None:
    base, root, outside = layout
    store = FilesystemArtifactStore(root)
    artifact_id = make_artifact_id("t1", "payload")
    folder = root / thread_key("t1")
    folder.mkdir()
    (folder / f"{artifact_id}.json").symlink_to(outside / "passwd")
    before = _snapshot(base)
    with pytest.raises(StorageError, match="symlink"):
        store.get("t1", artifact_id)
    with pytest.raises(StorageError, match="symlink"):
        store.put("t1", "payload", source="a", kind="tool")
    assert _snapshot(base) == before
    assert (outside / "passwd").read_text() == SECRET


def test_symlinked_root_is_refused(layout: tuple[Path, Path, Path]) -> None:
    base, root, outside = layout
    store = FilesystemArtifactStore(root)
    root.rmdir()
    root.symlink_to(outside, target_is_directory=True)
    before = _snapshot(base)
    with pytest.raises(StorageError):
        store.put("t1", "x", source="a", kind="tool")
    assert _snapshot(base) == before


def test_fifo_is_not_opened_as_an_artifact(layout: tuple[Path, Path, Path]) -> None:
    _, root, _ = layout
    store = FilesystemArtifactStore(root)
    ref = store.put("t1", "text", source="a", kind="tool")
    text_path = root / "t1" / f"{ref.artifact_id}.txt"
    text_path.unlink()
    os.mkfifo(text_path)
    with pytest.raises(StorageError, match="not a regular file"):
        store.get("t1", ref.artifact_id)


def test_files_are_private_and_no_temp_files_remain(layout: tuple[Path, Path, Path]) -> None:
    _, root, _ = layout
    store = FilesystemArtifactStore(root)
    ref = store.put("t1", "text", source="a", kind="tool")
    folder = root / "t1"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{ref.artifact_id}.txt", f"{ref.artifact_id}.json"]
    )
    assert folder.stat().st_mode & 0o077 == 0
    assert (folder / f"{ref.artifact_id}.txt").stat().st_mode & 0o077 == 0


def test_gc_cleans_interrupted_writes_and_missing_root(layout: tuple[Path, Path, Path]) -> None:
    _, root, _ = layout
    store = FilesystemArtifactStore(root)
    store.put("t1", "kept", source="a", kind="tool")
    folder = root / "t1"
    (folder / ".tmp-art_x.txt-0123").write_text("half")
    (folder / ("art_" + "b" * 24 + ".txt")).write_text("no sidecar")
    old = datetime.now(UTC) - timedelta(days=1)
    for name in (".tmp-art_x.txt-0123", "art_" + "b" * 24 + ".txt"):
        os.utime(folder / name, (old.timestamp(), old.timestamp()))
    report = store.gc()
    assert report.orphans_removed == 2
    assert len(store.list("t1")) == 1
    empty = FilesystemArtifactStore(root / "never-created")
    assert empty.gc().threads_scanned == 0
    assert not (root / "never-created").exists()


def test_delete_thread_removes_the_folder(layout: tuple[Path, Path, Path]) -> None:
    _, root, _ = layout
    store = FilesystemArtifactStore(root)
    store.put("t1", "a", source="a", kind="tool")
    store.put("t1", "b", source="a", kind="tool")
    assert len(store.delete_thread("t1")) == 2
    assert not (root / "t1").exists()
