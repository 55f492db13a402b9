"""TEST ONLY: named crash points, where a process under test SIGKILLs itself on request.

`FOLDWISE_TEST_CRASH_AT=<point>[:<nth>]` makes the process kill itself with SIGKILL (no
``finally``, no commit, no flush: what a power cut or the OOM killer does) the `nth` time (default
1) execution reaches `crash_point(<point>)`. It exists for the reliability campaign
(`foldwise bench reliability --area crash`, `tests/reliability/test_crash.py`) and must never
be set in production. Unset, `crash_point` costs one comparison with a cached `None`.

Two optional companions, read with it:

- `FOLDWISE_TEST_CRASH_ARM=<path>`: hits count only once `<path>` exists (the harness first
  checks what the previous crash left, then arms the next one; the file is looked for only when
  the named point is reached).
- `FOLDWISE_TEST_CRASH_MARK=<path>`: created (exclusively) right before the kill, holding the
  point and the pid; when it already exists the process does not crash. So one crash happens per
  mark file, even across the worker processes of `foldwise serve --workers N` and their
  restarts, and the harness knows the point was reached.

The points (each `.before` / `.after` the named write; "commit" means the write's transaction
committed):

- `checkpoint.before`, `checkpoint.after`: a checkpoint written under a thread lease (every
  step of a run, an automatic compaction's state update, a manual compaction's checkpoint),
  in `foldwise.gateway._checkpointer.FencedWrites.aput` (Postgres) and
  `foldwise.gateway._checkpointer_sqlite.FencedSqliteSaver.aput` (SQLite); on both the step's
  task writes commit in the same transaction.
- `writes.before`, `writes.after`: a step's task writes under a lease committed on their own,
  in `foldwise.gateway._held_writes.HeldWrites.flush` (both backends): writes no checkpoint
  took along (an interrupt's, an error's) when the run ends or a read of the thread settles
  them, and writes held under another lease before a checkpoint.
- `transcript.before`, `transcript.after`: messages appended to the transcript while a run
  streams (`TranscriptRecorder.messages`), and what a run start records (`reconcile`: the
  input and whatever a crash left in the state only).
- `receipt.auto.before`, `receipt.auto.after`: an automatic compaction's receipt and marker,
  recorded from a run's streamed state.
- `receipt.manual.before`, `receipt.manual.after`: `POST /threads/{id}/compact`'s receipt.
- `run.finish.before`, `run.finish.after`: a run's row finished (`success`, `error`...).
- `compact.finish.before`, `compact.finish.after`: a manual compaction's row finished.
- `lease.acquire.before`, `lease.acquire.after`, `lease.release.before`,
  `lease.release.after`: a thread lease taken or released.
- `memory.enqueue.before`, `memory.enqueue.after`: a run's slice queued for memory.
- `outbox.claim.after`: the memory worker claimed a batch (nothing applied yet).
- `outbox.apply.before`, `outbox.apply.after`: a batch's facts written (not yet completed).
- `outbox.complete.after`: the batch completed in the queue.
- `offload.write.before`, `offload.write.after`: an offloaded tool output's artifact written.
"""

from __future__ import annotations

import os
import signal

__all__ = [
    "CRASH_ARM_ENV",
    "CRASH_AT_ENV",
    "CRASH_MARK_ENV",
    "CRASH_POINTS",
    "crash_point",
    "parse_crash_at",
]

CRASH_AT_ENV = "FOLDWISE_TEST_CRASH_AT"
"""TEST ONLY: `<point>[:<nth>]`, the crash point to die at (see the module docstring)."""
CRASH_ARM_ENV = "FOLDWISE_TEST_CRASH_ARM"
"""TEST ONLY: a file whose existence arms the crash point."""
CRASH_MARK_ENV = "FOLDWISE_TEST_CRASH_MARK"
"""TEST ONLY: a file created right before the kill; one crash per file."""

_PAIRED = tuple(
    f"{write}.{when}"
    for write in (
        "checkpoint",
        "writes",
        "transcript",
        "receipt.auto",
        "receipt.manual",
        "run.finish",
        "compact.finish",
        "lease.acquire",
        "lease.release",
        "memory.enqueue",
        "outbox.apply",
        "offload.write",
    )
    for when in ("before", "after")
)
CRASH_POINTS = (*_PAIRED, "outbox.claim.after", "outbox.complete.after")
"""Every point named in the code (the module docstring says where each is)."""


class _Target:
    """The armed point: name, which hit, hits so far."""

    __slots__ = ("arm", "armed", "hits", "mark", "name", "nth")

    def __init__(self, name: str, nth: int, arm: str | None, mark: str | None) -> None:
        self.name, self.nth, self.arm, self.mark = name, nth, arm, mark
        self.armed = arm is None
        self.hits = 0


def parse_crash_at(value: str) -> tuple[str, int]:
    """`"point:3"` -> `("point", 3)`; `"point"` -> `("point", 1)`.

    Raises:
        ValueError: An unknown point or an `nth` below 1.
    """
    name, _, nth = value.partition(":")
    if name not in CRASH_POINTS:
        raise ValueError(f"{CRASH_AT_ENV}: unknown crash point {name!r}")
    count = int(nth) if nth else 1
    if count < 1:
        raise ValueError(f"{CRASH_AT_ENV}: the hit number must be >= 1, got {count}")
    return name, count


def _read_env() -> _Target | None:
    value = os.environ.get(CRASH_AT_ENV)
    if not value:
        return None
    name, nth = parse_crash_at(value)
    return _Target(name, nth, os.environ.get(CRASH_ARM_ENV), os.environ.get(CRASH_MARK_ENV))


_UNREAD = object()
_target: object = _UNREAD


def crash_point(name: str) -> None:
    """TEST ONLY: SIGKILL this process if `name` is the armed point's `nth` hit; else nothing."""
    global _target
    target = _target
    if target is None:
        return
    if target is _UNREAD:
        target = _target = _read_env()
        if target is None:
            return
    assert isinstance(target, _Target)
    if target.name != name:
        return
    if not target.armed:
        if target.arm is None or not os.path.exists(target.arm):
            return
        target.armed = True
    target.hits += 1
    if target.hits != target.nth:
        return
    if target.mark is not None:
        try:
            fd = os.open(target.mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return  # another process (or this one before a restart) already crashed for it
        os.write(fd, f"{name}:{target.nth} {os.getpid()}\n".encode())
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
