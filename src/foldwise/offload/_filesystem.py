"""`FilesystemArtifactStore`: one folder per thread under a root, no path from outside.

Layout: `root/<thread key>/<artifact id>.txt` holds the UTF-8 text and `<artifact id>.json` its
reference; the JSON sidecar is written last, so an artifact exists only once it is complete.

Every name below the root is generated (a thread key or an artifact id, both checked by full-match
regexes). Every file operation goes through directory file descriptors (`openat` and friends)
with `O_NOFOLLOW`: the root is resolved once, thread folders are opened with
`O_DIRECTORY | O_NOFOLLOW` relative to it, and files relative to those. A symlink planted
anywhere inside the root, to a folder or a file, is refused (`ELOOP`), so nothing outside the
root is ever read, created or replaced. Writes go to a temporary file in the same folder, are
fsynced and renamed into place (an atomic replace on POSIX), then the folder is fsynced.

The primitives are blocking calls; the async methods (`aput`, `aread_page`, ...) run each in a
worker thread (`BlockingArtifactStore`), so no `fsync` happens on the event loop.

Needs POSIX `dir_fd` support (Linux, macOS, the BSDs); elsewhere the constructor raises
`StorageError` and `StoreArtifactStore` is the way to go.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import logging
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from foldwise.errors import StorageError
from foldwise.offload._blocking import BlockingArtifactStore, TextHandle
from foldwise.offload._ids import ARTIFACT_ID_PATTERN, THREAD_KEY_PATTERN

__all__ = ["FilesystemArtifactStore"]

logger = logging.getLogger(__name__)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_MAX_META_BYTES = 64 * 1024
_TMP_PREFIX = ".tmp-"


def _supported() -> bool:
    needed = (os.open, os.mkdir, os.rename, os.unlink, os.rmdir, os.stat)
    return bool(_NOFOLLOW and _DIRECTORY) and all(f in os.supports_dir_fd for f in needed)


class FilesystemArtifactStore(BlockingArtifactStore):
    """Artifacts as files under `root`, one folder per thread.

    Args:
        root: The store root; created (mode 0700) on the first write. Resolved once, here.
        max_bytes_per_thread: Quota enforced after every write; `None` for none.
        clock: Current time (aware UTC); injectable for tests.

    Raises:
        StorageError: The platform lacks `dir_fd` / `O_NOFOLLOW` support.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes_per_thread: int | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(max_bytes_per_thread=max_bytes_per_thread, clock=clock)
        if not _supported():
            raise StorageError(
                "FilesystemArtifactStore needs POSIX dir_fd and O_NOFOLLOW support; "
                "use StoreArtifactStore on this platform"
            )
        self.root = os.path.realpath(os.fspath(root))

    def __repr__(self) -> str:
        return f"FilesystemArtifactStore({self.root!r})"

    # -- descriptors -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _root_fd(self, *, create: bool) -> Iterator[int | None]:
        if create:
            try:
                os.makedirs(self.root, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create the artifact root: {exc.strerror}") from exc
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except FileNotFoundError:
            if create:
                raise StorageError("the artifact root vanished") from None
            yield None
            return
        except OSError as exc:
            raise StorageError(f"cannot open the artifact root: {exc.strerror}") from exc
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _thread_fd(self, key: str, *, create: bool = False) -> Iterator[int | None]:
        """A descriptor of the thread folder, or None when it does not exist (and not create)."""
        if not THREAD_KEY_PATTERN.fullmatch(key):  # defence in depth: keys are generated
            raise StorageError("invalid thread key")
        with self._root_fd(create=create) as root_fd:
            if root_fd is None:
                yield None
                return
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(key, 0o700, dir_fd=root_fd)
            try:
                fd = os.open(key, _DIR_FLAGS, dir_fd=root_fd)
            except FileNotFoundError:
                if create:
                    raise StorageError(f"thread folder {key} vanished") from None
                yield None
                return
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise StorageError(
                        f"refusing thread folder {key}: it is not a real directory (symlink?)"
                    ) from exc
                raise StorageError(f"cannot open thread folder {key}: {exc.strerror}") from exc
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _open_regular(name: str, dir_fd: int) -> int | None:
        """Open a regular file for reading without following links; None when missing."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise StorageError(f"refusing {name}: it is a symlink") from exc
            raise StorageError(f"cannot open {name}: {exc.strerror}") from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StorageError(f"refusing {name}: not a regular file")
        os.set_blocking(fd, True)
        return fd

    @staticmethod
    def _atomic_write(dir_fd: int, name: str, data: bytes) -> None:
        tmp = f"{_TMP_PREFIX}{name}-{secrets.token_hex(8)}"
        fd = os.open(tmp, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            # POSIX rename replaces the target atomically (os.replace lacks dir_fd support).
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)

    # -- primitives ------------------------------------------------------------------------

    def _write(self, key: str, artifact_id: str, content: str | None, meta: dict[str, Any]) -> None:
        try:
            with self._thread_fd(key, create=True) as fd:
                if fd is None:  # pragma: no cover - create=True never yields None
                    raise StorageError(f"thread folder {key} is missing")
                if content is not None:
                    data = content.encode("utf-8", "surrogatepass")
                    self._atomic_write(fd, f"{artifact_id}.txt", data)
                sidecar = json.dumps(meta, ensure_ascii=True).encode("ascii")
                self._atomic_write(fd, f"{artifact_id}.json", sidecar)
        except OSError as exc:
            raise StorageError(
                f"cannot store artifact {artifact_id} for thread key {key}: {exc.strerror or exc}"
            ) from exc

    def _read_meta_at(self, fd: int, artifact_id: str) -> dict[str, Any] | None:
        meta_fd = self._open_regular(f"{artifact_id}.json", fd)
        if meta_fd is None:
            return None
        with os.fdopen(meta_fd, "rb") as handle:
            data = handle.read(_MAX_META_BYTES + 1)
        if len(data) > _MAX_META_BYTES:
            raise StorageError(f"metadata of {artifact_id} is too large")
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise StorageError(f"metadata of {artifact_id} is corrupt") from exc
        if not isinstance(value, dict) or value.get("artifact_id") != artifact_id:
            raise StorageError(f"metadata of {artifact_id} is corrupt")
        return value

    def _read_meta(self, key: str, artifact_id: str) -> dict[str, Any] | None:
        with self._thread_fd(key) as fd:
            return None if fd is None else self._read_meta_at(fd, artifact_id)

    def _list_meta(self, key: str) -> builtins.list[dict[str, Any]]:
        metas: list[dict[str, Any]] = []
        with self._thread_fd(key) as fd:
            if fd is None:
                return metas
            for name in sorted(os.listdir(fd)):
                stem, dot, ext = name.rpartition(".")
                if dot and ext == "json" and ARTIFACT_ID_PATTERN.fullmatch(stem):
                    try:
                        meta = self._read_meta_at(fd, stem)
                    except StorageError as exc:
                        logger.warning("offload: skipping artifact %s: %s", stem, exc)
                        continue
                    if meta is not None:
                        metas.append(meta)
        return metas

    def _open_text(self, key: str, artifact_id: str, meta: dict[str, Any]) -> TextHandle:
        with self._thread_fd(key) as fd:
            text_fd = None if fd is None else self._open_regular(f"{artifact_id}.txt", fd)
        if text_fd is None:
            raise StorageError(f"the text of artifact {artifact_id} is missing")
        return os.fdopen(text_fd, encoding="utf-8", errors="surrogatepass", newline="")

    def _remove(self, key: str, artifact_id: str, meta: dict[str, Any] | None) -> None:
        with self._thread_fd(key) as fd:
            if fd is None:
                return
            for name in (f"{artifact_id}.json", f"{artifact_id}.txt"):
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StorageError(f"cannot delete {name}: {exc.strerror}") from exc

    def _thread_keys(self) -> builtins.list[str]:
        keys: list[str] = []
        with self._root_fd(create=False) as root_fd:
            if root_fd is None:
                return keys
            for name in sorted(os.listdir(root_fd)):
                if not THREAD_KEY_PATTERN.fullmatch(name):
                    continue
                try:
                    info = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    keys.append(name)
                else:
                    logger.warning("offload: ignoring %s in the artifact root: not a folder", name)
        return keys

    def _finish_thread(self, key: str) -> bool:
        with self._root_fd(create=False) as root_fd:
            if root_fd is None:
                return False
            try:
                os.rmdir(key, dir_fd=root_fd)
            except FileNotFoundError:
                return True
            except OSError as exc:
                # Not empty (a foreign file) or not a folder: leave it to the operator.
                logger.warning("offload: thread folder %s not removed: %s", key, exc.strerror)
                return False
        return True

    def _clean_orphans(self, key: str, *, older_than: datetime) -> int:
        removed = 0
        limit = older_than.timestamp()
        with self._thread_fd(key) as fd:
            if fd is None:
                return 0
            names = os.listdir(fd)
            complete = {n[:-5] for n in names if n.endswith(".json")}
            for name in names:
                stem = name[:-4] if name.endswith(".txt") else None
                orphan_text = stem is not None and stem not in complete
                if not (name.startswith(_TMP_PREFIX) or orphan_text):
                    continue
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if info.st_mtime >= limit or stat.S_ISDIR(info.st_mode):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
                    removed += 1
        return removed
