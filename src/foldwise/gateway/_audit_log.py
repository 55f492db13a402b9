"""The audit log: `GET /threads/{id}/transcript` and `GET /threads/{id}/compactions`.

The transcript holds every visible message ever exchanged, with compaction markers. It is
recorded while runs happen (input messages, then every new message of the
streamed state), so messages that compaction later folded into the summary are still here, in
order, with a `compaction` entry where each compaction happened. Hidden framework messages are
never recorded. Pages go forward: pass the last `seq` you saw as `after_seq`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from foldwise.gateway._deps import GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._messages import message_from_record
from foldwise.gateway._schemas import AfterSeqQuery, OffsetQuery, PageQuery
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import TranscriptEntry

__all__ = ["router"]

router = APIRouter(tags=["transcript"])


def _entry_json(entry: TranscriptEntry) -> dict[str, Any]:
    message: dict[str, Any] | None
    if entry.kind == "message":
        message = message_from_record(entry.message)
        if message is None:  # written by a newer or older format: show what is stored
            message = entry.message
    else:
        message = entry.message
    return {
        "seq": entry.seq,
        "kind": entry.kind,
        "run_id": entry.run_id,
        "message_id": entry.message_id,
        "created_at": entry.created_at,
        "message": message,
    }


@router.get("/threads/{thread_id}/transcript")
async def get_transcript(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    after_seq: AfterSeqQuery = 0,
    limit: PageQuery = 100,
) -> Response:
    """Transcript entries with `seq > after_seq`, oldest first, at most `limit`.

    Returns `{thread_id, entries, next_after_seq, has_more}`; each entry has `seq`, `kind`
    (`message` or `compaction`), `run_id`, `message_id`, `created_at` and `message` (a message
    in the same shape as in the thread state, or the compaction's summary).
    """
    await require_thread(gateway, thread_id, identity)
    storage = gateway.storage
    entries = await storage.list_transcript(thread_id, after_seq=after_seq, limit=limit)
    has_more = bool(entries) and bool(
        await storage.list_transcript(thread_id, after_seq=entries[-1].seq, limit=1)
    )
    return JSONResponse(
        {
            "thread_id": thread_id,
            "entries": [_entry_json(e) for e in entries],
            "next_after_seq": entries[-1].seq if entries else after_seq,
            "has_more": has_more,
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
