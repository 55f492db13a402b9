"""The audit log: `GET /threads/{id}/transcript` and `GET /threads/{id}/compactions`.

The transcript holds every visible message ever exchanged, with compaction markers. It is
recorded while runs happen (input messages, then every new message of the
streamed state), so messages that compaction later folded into the summary are still here, in
order, with a `compaction` entry where each compaction happened. Hidden framework messages are
never recorded. Pages go forward (pass the last `seq` you saw as `after_seq`) or backward
(pass the first `seq` you hold as `before_seq`: the newest page first). Each message entry says
whether the model still sees it verbatim (`in_context`: its id is in the thread's current
checkpoint, whose message ids are cached by checkpoint id, so paging does not reload it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, MutableMapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from langgraph.checkpoint.base import BaseCheckpointSaver

from foldwise.gateway._checkpoint_head import read_head
from foldwise.gateway._deps import GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._messages import message_from_record
from foldwise.gateway._schemas import MAX_OFFSET, AfterSeqQuery, OffsetQuery, PageQuery
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import TranscriptEntry

__all__ = ["context_message_ids", "router"]

router = APIRouter(tags=["transcript"])

BeforeSeqQuery = Annotated[int | None, Query(ge=1, le=MAX_OFFSET)]
"""`?before_seq=`: the first transcript `seq` held, 1..2^63-1 (a page backwards)."""


async def context_message_ids(
    checkpointer: BaseCheckpointSaver[Any],
    thread_id: str,
    *,
    cache: MutableMapping[tuple[str, str], frozenset[str]] | None = None,
) -> frozenset[str]:
    """Ids of the messages in the thread's head checkpoint (what the model still sees).

    The head's id is read cheaply (`read_head`); the checkpoint itself is loaded only when
    `cache` has no entry for `(thread_id, head id)`. A checkpoint never changes once written
    and every change to a thread (a run, a state update, a compaction, an undo) writes a new
    one with a new id, so a cached entry is never stale.
    """
    head = await read_head(checkpointer, thread_id)
    if head is None:
        return frozenset()
    key = (thread_id, head.checkpoint_id)
    if cache is not None and (found := cache.get(key)) is not None:
        if isinstance(cache, OrderedDict):
            cache.move_to_end(key)
        return found
    config: Any = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": head.checkpoint_id,
        }
    }
    saved = await checkpointer.aget_tuple(config)
    if saved is None:  # deleted since the head was read
        return frozenset()
    messages = (saved.checkpoint.get("channel_values") or {}).get("messages") or []
    ids = frozenset(str(m.id) for m in messages if getattr(m, "id", None) is not None)
    if cache is not None:
        cache[key] = ids
    return ids


def _entry_json(entry: TranscriptEntry, in_context: Collection[str]) -> dict[str, Any]:
    message: dict[str, Any] | None
    if entry.kind == "message":
        message = message_from_record(entry.message)
        if message is None:  # written by a newer or older format: show what is stored
            message = entry.message
    else:
        message = entry.message
    found = {
        "seq": entry.seq,
        "kind": entry.kind,
        "run_id": entry.run_id,
        "message_id": entry.message_id,
        "created_at": entry.created_at,
        "message": message,
    }
    if entry.kind == "message":
        found["in_context"] = entry.message_id is not None and entry.message_id in in_context
    else:  # markers written before the summary was recorded serve it as null
        found["message"] = {"summary": None, **message}
    return found


@router.get("/threads/{thread_id}/transcript")
async def get_transcript(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    after_seq: AfterSeqQuery = 0,
    limit: PageQuery = 100,
    before_seq: BeforeSeqQuery = None,
) -> Response:
    """Transcript entries with `seq > after_seq`, oldest first, at most `limit`.

    With `before_seq`, the newest `limit` entries with `seq < before_seq` (and `> after_seq`),
    still oldest first; `has_more` then says whether older ones exist.

    Returns `{thread_id, entries, next_after_seq, next_before_seq, has_more, total}`; each
    entry has `seq`, `kind` (`message` or `compaction`), `run_id`, `message_id`, `created_at`
    and `message` (a message in the same shape as in the thread state, or the compaction's
    marker with its `summary`); message entries add `in_context`.
    """
    await require_thread(gateway, thread_id, identity)
    storage = gateway.storage
    entries = await storage.list_transcript(
        thread_id, after_seq=after_seq, limit=limit, before_seq=before_seq
    )
    if before_seq is None:
        more = bool(entries) and bool(
            await storage.list_transcript(thread_id, after_seq=entries[-1].seq, limit=1)
        )
    else:
        more = bool(entries) and bool(
            await storage.list_transcript(
                thread_id, after_seq=after_seq, before_seq=entries[0].seq, limit=1
            )
        )
    in_context = await context_message_ids(
        gateway.checkpointer, thread_id, cache=gateway.context_ids
    )
    return JSONResponse(
        {
            "thread_id": thread_id,
            "entries": [_entry_json(e, in_context) for e in entries],
            "next_after_seq": entries[-1].seq if entries else after_seq,
            "next_before_seq": entries[0].seq if entries else before_seq,
            "has_more": more,
            "total": await storage.count_transcript(thread_id),
        }
    )


@router.get("/threads/{thread_id}/compactions")
async def list_compactions(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    limit: PageQuery = 100,
    offset: OffsetQuery = 0,
) -> Response:
    """The thread's compaction receipts, oldest first (automatic and manual).

    Each is the receipt as recorded, with the run that produced it and `stored_at`.
    """
    await require_thread(gateway, thread_id, identity)
    records = await gateway.storage.list_receipts(thread_id, limit=limit, offset=offset)
    return JSONResponse(
        [
            {**r.receipt, "run_id": r.receipt.get("run_id") or r.run_id, "stored_at": r.created_at}
            for r in records
        ]
    )
