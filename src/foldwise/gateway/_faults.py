"""TEST ONLY: hold a gateway process inside its crash window so a test can kill it there.

`FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT=<path>` exists for the crash-recovery test
(`tests/test_gateway_crash.py`) and must never be set in production. When it is set, the first
time a run (or a manual compaction) has committed a checkpoint holding a message or compaction
receipt that is not yet in the transcript or receipts tables, the process writes `<path>` and
sleeps instead of writing them. The test waits for the file, SIGKILLs the process and checks that
the next run or compaction on the same database records what the state kept. Unset (always, in
real deployments), `pause_after_checkpoint` returns at once.

`crash_point` (from `foldwise._crash`, where the core packages can reach it too) is the other
test-only hook: `FOLDWISE_TEST_CRASH_AT=<point>[:<nth>]` makes the process SIGKILL itself at a
named point (before/after a checkpoint commit, a transcript or receipt write, a run row's
finish, a lease acquire/release, a memory outbox claim/apply, an artifact write). The reliability
campaign (`foldwise bench reliability --area crash`) uses it; unset, it is a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from foldwise._crash import CRASH_AT_ENV, CRASH_POINTS, crash_point
from foldwise.gateway._capture import TranscriptRecorder

__all__ = [
    "CRASH_AT_ENV",
    "CRASH_POINTS",
    "PAUSE_AFTER_CHECKPOINT_ENV",
    "crash_point",
    "pause_after_checkpoint",
]

logger = logging.getLogger(__name__)

PAUSE_AFTER_CHECKPOINT_ENV = "FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT"
"""TEST ONLY: the marker file to write before pausing inside the crash window."""

_PAUSE_SECONDS = 3600.0
_POLL_SECONDS = 0.05
_POLLS = 400
_paused: list[bool] = []


def _unrecorded(
    recorder: TranscriptRecorder, values: Mapping[str, Any]
) -> tuple[set[str], set[str]]:
    messages = {
        str(m.id)
        for m in values.get("messages") or []
        if isinstance(m, BaseMessage) and m.id is not None
    }
    receipts = {str(r.get("id")) for r in values.get("compactions") or [] if isinstance(r, Mapping)}
    return messages - recorder.known_messages, receipts - recorder.known_receipts


async def pause_after_checkpoint(
    graph: Any, recorder: TranscriptRecorder, values: Mapping[str, Any]
) -> None:
    """TEST ONLY: pause (once per process) before `recorder` writes what `values` adds.

    Waits until the thread's checkpoint holds the new messages and receipts (LangGraph may
    still be committing it), writes the marker file named by the environment variable and
    sleeps. Does nothing unless `FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT` is set.
    """
    path = os.environ.get(PAUSE_AFTER_CHECKPOINT_ENV)
    if not path or _paused:
        return
    messages, receipts = _unrecorded(recorder, values)
    if not (messages or receipts):
        return
    config = {"configurable": {"thread_id": recorder.thread_id}}
    for _ in range(_POLLS):
        state = (await graph.aget_state(config)).values or {}
        have = {str(m.id) for m in state.get("messages") or [] if isinstance(m, BaseMessage)}
        have_receipts = {
            str(r.get("id")) for r in state.get("compactions") or [] if isinstance(r, Mapping)
        }
        if messages <= have and receipts <= have_receipts:
            break
        await asyncio.sleep(_POLL_SECONDS)
    else:
        logger.error("test pause: the checkpoint never held the new entries; not pausing")
        return
    _paused.append(True)
    await asyncio.to_thread(Path(path).write_text, recorder.thread_id, encoding="utf-8")
    logger.warning("TEST ONLY: paused after the checkpoint commit of thread %s", recorder.thread_id)
    await asyncio.sleep(_PAUSE_SECONDS)
