"""foldwise's compaction routes: `POST /threads/{id}/compact` and `GET /threads/{id}/compactions`.

Manual compaction runs the same planner and summarizer candidates as the automatic path
(`foldwise.acompact_thread_outcome`) under the thread's lease, writes one checkpoint when it
compacts, and stores the receipt with a transcript marker in one transaction. The checkpoint
write is fenced by the lease (the checkpointer checks it in the write's own transaction), and
the receipt is stored only after that write committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Response

from foldwise._crash import crash_point
from foldwise._manual import acompact_thread_outcome
from foldwise.compaction import CompactionOutcome
from foldwise.errors import CompactionDisabledError, ThreadBusyError, ThreadNotFoundError
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep, ThreadIdDep, require_thread
from foldwise.gateway._schemas import CompactRequest
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import RunStatus

__all__ = ["router"]

router = APIRouter(tags=["compaction"])


def _response(
    thread_id: str,
    outcome: CompactionOutcome | None,
    *,
    message_count: int,
    checkpoint_id: str | None,
) -> dict[str, Any]:
    if outcome is None:  # the thread has no checkpoint yet: nothing was ever said
        return {
            "thread_id": thread_id,
            "compacted": False,
            "reason": "not_enough_messages",
            "detail": "the thread has no messages yet",
            "removed_message_count": 0,
            "preserved_message_count": 0,
            "summary_updated": False,
            "tokens_before": 0,
            "tokens_after": 0,
            "receipt": None,
            "checkpoint_id": checkpoint_id,
        }
    receipt = outcome.receipt
    decision = outcome.decision
    reason = outcome.skip_reason
    return {
        "thread_id": thread_id,
        "compacted": outcome.compacted,
        "reason": None if outcome.compacted or reason is None else str(reason.value),
        "detail": decision.detail,
        "removed_message_count": receipt.messages_removed if receipt else 0,
        "preserved_message_count": receipt.messages_preserved if receipt else message_count,
        "summary_updated": outcome.compacted,
        "tokens_before": receipt.tokens_before if receipt else decision.tokens_before,
        "tokens_after": receipt.tokens_after if receipt else decision.tokens_before,
        "receipt": receipt.to_dict() if receipt else None,
        "checkpoint_id": checkpoint_id,
    }


def _still_held(
    gateway: Gateway, thread_id: str, operation_id: str
) -> Callable[[], Awaitable[None]]:
    """A check run before the write: fail fast if the lease went while the summary ran."""

    async def still_held() -> None:
        # The checkpoint write is fenced too; this only avoids a doomed write.
        ttl = gateway.runs.leases.ttl
        if not await gateway.storage.renew_thread_lock(thread_id, operation_id, ttl):
            raise ThreadBusyError(thread_id, "another operation")

    return still_held


_OptionalBody = CompactRequest | None


@router.post("/threads/{thread_id}/compact")
async def compact_thread(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep, body: _OptionalBody = None
) -> Response:
    """Compact the thread now.

    200 with `compacted: true` and the receipt, or `compacted: false` and the precise `reason`
    (`not_enough_messages`, `below_threshold`, `everything_rescued`, `gain_below_minimum`);
    404 unknown thread; 409 a run is in flight or compaction is disabled; 422 invalid body;
    502 every summarizer candidate failed (the thread is unchanged).
    """
    body = body or CompactRequest()
    record = await require_thread(gateway, thread_id, identity)
    hosted = gateway.agent_for(record, assistant_id=body.assistant_id, model_name=body.model_name)
    middleware = hosted.summarization
    if middleware is None or not middleware.enabled:
        raise CompactionDisabledError(
            "context compaction is disabled for this agent (summarization.enabled: false)"
        )
    storage = gateway.storage
    async with gateway.runs.exclusive(thread_id, "compact", graph=hosted.graph) as operation_id:
        fence = gateway.runs.leases.fence(thread_id, operation_id)
        config = {"configurable": {"thread_id": thread_id, **fence}}
        assistant = body.assistant_id or str(record.metadata.get("assistant_id") or "agent")
        await storage.create_run(
            thread_id,
            operation_id,
            assistant,
            "compact",
            metadata={
                "force": body.force,
                "keep": body.keep.model_dump() if body.keep else None,
                "model_name": body.model_name,
            },
        )
        status: RunStatus = "error"
        error_text: str | None = None
        outcome: CompactionOutcome | None = None
        receipt: dict[str, Any] | None = None
        try:
            work = acompact_thread_outcome(
                hosted.graph,
                config,  # type: ignore[arg-type]
                force=body.force,
                keep=body.keep,
                model_name=body.model_name,
                before_write=_still_held(gateway, thread_id, operation_id),
            )
            try:
                outcome = await gateway.runs.guarded(thread_id, operation_id, work)
            except ThreadNotFoundError:
                outcome = None  # created but never run: there is nothing to compact
            if outcome is not None and outcome.receipt is not None:
                receipt = outcome.receipt.to_dict()
                receipt["run_id"] = receipt.get("run_id") or operation_id
                await gateway.runs.record_receipt(
                    thread_id, operation_id, receipt, hosted.graph, outcome.summary_text
                )
            status = "success"
        except asyncio.CancelledError:
            status, error_text = "interrupted", "cancelled"
            raise
        except Exception as error:
            error_text = str(error)
            raise
        finally:
            crash_point("compact.finish.before")  # tests only
            await storage.finish_run(operation_id, status, error_text)
            crash_point("compact.finish.after")  # tests only
    snapshot = await hosted.graph.aget_state(config)
    messages = (snapshot.values or {}).get("messages") or []
    checkpoint_id = (snapshot.config.get("configurable") or {}).get("checkpoint_id")
    answer = _response(thread_id, outcome, message_count=len(messages), checkpoint_id=checkpoint_id)
    if receipt is not None:
        answer["receipt"] = receipt  # as stored and listed by /compactions (with its run id)
    return JSONResponse(answer)
