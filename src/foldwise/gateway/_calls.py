"""`GET /threads/{id}/calls`: the thread's model calls and compactions, for a tokens-per-call chart.

A model call is an AI message of the transcript that carries the provider's usage
(`usage_metadata.input_tokens`); compactions are the transcript's compaction markers. Both come
from the transcript (what was said and done), never from the checkpoint (what is left), so the
chart goes back past every compaction. The window, the lowest token trigger and the reserved
output tokens are the thread's agent's current policy.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from foldwise.compaction import CompactionPolicy
from foldwise.gateway._deps import GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._schemas import MAX_PAGE
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import GatewayStorage, TranscriptEntry

__all__ = ["MAX_CALLS", "router"]

router = APIRouter(tags=["context"])

MAX_CALLS = 2000
"""Largest `limit` of `/calls`."""

CallsLimitQuery = Annotated[int, Query(ge=1, le=MAX_CALLS)]
"""`?limit=`: model calls to return, 1..2000."""


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _call_json(entry: TranscriptEntry) -> dict[str, Any]:
    data = entry.message.get("data") or {}
    usage = data.get("usage_metadata") or {}
    response = data.get("response_metadata") or {}
    model = response.get("model_name") or response.get("model")
    return {
        "seq": entry.seq,
        "run_id": entry.run_id,
        "created_at": entry.created_at,
        "message_id": entry.message_id,
        "input_tokens": _int_or_none(usage.get("input_tokens")),
        "output_tokens": _int_or_none(usage.get("output_tokens")),
        "model": model if isinstance(model, str) else None,
    }


def _compaction_json(entry: TranscriptEntry) -> dict[str, Any]:
    marker = entry.message
    return {
        "seq": entry.seq,
        "receipt_id": marker.get("receipt_id"),
        "created_at": entry.created_at,
        "tokens_before": _int_or_none(marker.get("tokens_before")),
        "tokens_after": _int_or_none(marker.get("tokens_after")),
        "manual": bool(marker.get("manual")),
    }


async def _compactions(storage: GatewayStorage, thread_id: str, after_seq: int) -> list[Any]:
    """Every compaction marker with `seq > after_seq`, oldest first."""
    found: list[TranscriptEntry] = []
    while True:
        page = await storage.list_transcript(
            thread_id, after_seq=after_seq, limit=MAX_PAGE, kind="compaction"
        )
        found += page
        if len(page) < MAX_PAGE:
            return found
        after_seq = page[-1].seq


def _lowest_token_trigger(policy: CompactionPolicy) -> int | None:
    limits = [t.limit for t in policy.triggers if t.kind in ("tokens", "fraction")]
    return min(limits) if limits else None


@router.get("/threads/{thread_id}/calls")
async def list_calls(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    limit: CallsLimitQuery = 500,
) -> Response:
    """The newest `limit` model calls (oldest first) and the compactions among them.

    Returns `{thread_id, window, trigger_tokens, reserved_output_tokens, calls, compactions}`:
    each call `{seq, run_id, created_at, message_id, input_tokens, output_tokens, model}`, each
    compaction `{seq, receipt_id, created_at, tokens_before, tokens_after, manual}`. When older
    calls were left out, compactions before the first call returned are left out too.
    """
    record = await require_thread(gateway, thread_id, identity)
    storage = gateway.storage
    calls = await storage.list_model_calls(thread_id, limit=limit)
    after_seq = calls[0].seq if calls and len(calls) == limit else 0
    markers = await _compactions(storage, thread_id, after_seq)
    middleware = gateway.agent_for(record).summarization
    policy = middleware.policy if middleware is not None else None
    return JSONResponse(
        {
            "thread_id": thread_id,
            "window": policy.context_window if policy is not None else None,
            "trigger_tokens": _lowest_token_trigger(policy) if policy is not None else None,
            "reserved_output_tokens": policy.reserved_output_tokens if policy else None,
            "calls": [_call_json(e) for e in calls],
            "compactions": [_compaction_json(e) for e in markers],
        }
    )
