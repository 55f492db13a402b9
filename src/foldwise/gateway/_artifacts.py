"""Artifact routes: a thread's offloaded tool outputs, pasted inputs and compaction archives.

`GET /threads/{id}/artifacts` lists them (newest first) with where each was created in the
transcript; `GET /threads/{id}/artifacts/{artifact_id}` pages one through the same rows the
model's `read_offloaded` returns; `.../search` searches it as `search_offloaded` does (a regex
runs in a killable worker process with a time budget). Each regex search holds a worker thread
and a child process for up to its budget, so the route runs at most `MAX_REGEX_SEARCHES` of
them at once per process; a request that finds no slot free within `REGEX_SLOT_WAIT_SECONDS`
is answered 429 with `Retry-After` (plain substring searches are not limited). The model's own
`search_offloaded` calls do not pass through this route and are not limited by it.

The store is the thread's agent's (`HostedAgent.artifact_store`, else the configured one),
always called through its async methods: the filesystem store runs its blocking I/O in a
worker thread, a LangGraph store is awaited. Bad input is a 422 naming `artifact_id` or
`pattern` (checked by the tools' own `validate_artifact_id` and `check_pattern`), and an id
the thread does not hold is 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from foldwise.errors import ArtifactIdError
from foldwise.gateway._deps import (
    MAX_REGEX_SEARCHES,
    Gateway,
    GatewayDep,
    IdentityDep,
    ThreadIdDep,
    require_thread,
)
from foldwise.gateway._errors import RequestFieldError, SearchesBusyError
from foldwise.gateway._schemas import MAX_OFFSET
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import ThreadRecord, TranscriptLocation
from foldwise.offload import (
    DEFAULT_PAGE_CHARS,
    ArtifactRef,
    ArtifactStore,
    check_pattern,
    validate_artifact_id,
)

__all__ = [
    "MAX_ARTIFACT_ROWS",
    "MAX_SEARCH_MATCHES",
    "REGEX_SLOT_WAIT_SECONDS",
    "artifact_store_for",
    "router",
]

router = APIRouter(tags=["artifacts"])

MAX_ARTIFACT_ROWS = 500
"""Largest `limit` of one artifact page."""
MAX_SEARCH_MATCHES = 200
"""Largest `max_matches` of one search (the store's own bound)."""
REGEX_SLOT_WAIT_SECONDS = 0.25
"""How long a regex search waits for a free slot before the route answers 429."""

ArtifactIdPath = Annotated[str, Path(min_length=1, max_length=64, description="art_ + 24 hex")]
OffsetRows = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
LimitRows = Annotated[int, Query(ge=1, le=MAX_ARTIFACT_ROWS)]
Pattern = Annotated[str, Query(min_length=1, max_length=500)]
MaxMatches = Annotated[int, Query(ge=1, le=MAX_SEARCH_MATCHES)]


def artifact_store_for(gateway: Gateway, record: ThreadRecord) -> ArtifactStore:
    """The artifact store of the thread's agent (the configured one unless it brings its own)."""
    hosted = gateway.agent_for(record)
    return hosted.artifact_store or gateway.agents.default_artifacts


def _checked_id(artifact_id: str) -> str:
    try:
        return validate_artifact_id(artifact_id)
    except ArtifactIdError as error:
        raise RequestFieldError("artifact_id", str(error)) from None


def _checked_pattern(pattern: str, *, regex: bool) -> None:
    """The search tool's own check (empty, too long, invalid regex), as a 422 on `pattern`."""
    try:
        check_pattern(pattern, regex=regex)
    except ValueError as error:
        raise RequestFieldError("pattern", str(error)) from None


@asynccontextmanager
async def _search_slot(gateway: Gateway, *, regex: bool) -> AsyncIterator[None]:
    """Hold one of the gateway's regex search slots (none needed for a plain search).

    Raises:
        SearchesBusyError: No slot came free within `REGEX_SLOT_WAIT_SECONDS` (429).
    """
    if not regex:
        yield
        return
    slots = gateway.regex_searches
    try:
        await asyncio.wait_for(slots.acquire(), REGEX_SLOT_WAIT_SECONDS)
    except TimeoutError:
        raise SearchesBusyError(MAX_REGEX_SEARCHES) from None
    try:
        yield
    finally:
        slots.release()


def _origin(ref: ArtifactRef, found: list[TranscriptLocation]) -> dict[str, Any]:
    """The transcript entry an artifact came from: its message, tool result or compaction."""
    message_id = ref.meta.get("message_id") or None
    call_id = ref.meta.get("tool_call_id")
    for location in found:
        if (
            (message_id is not None and location.message_id == message_id)
            or (call_id and location.tool_call_id == call_id)
            or (ref.kind == "archive" and location.archive_id == ref.artifact_id)
        ):
            return {"message_id": location.message_id, "seq": location.seq}
    return {"message_id": message_id, "seq": None}


@router.get("/threads/{thread_id}/artifacts")
async def list_artifacts(
    gateway: GatewayDep, thread_id: ThreadIdDep, identity: IdentityDep
) -> Response:
    """The thread's artifacts, newest first, each with `origin: {message_id, seq}`."""
    record = await require_thread(gateway, thread_id, identity)
    refs = await artifact_store_for(gateway, record).alist(thread_id)
    refs.reverse()  # the store lists oldest first
    found = await gateway.storage.locate_transcript(
        thread_id,
        message_ids=[r.meta["message_id"] for r in refs if r.meta.get("message_id")],
        tool_call_ids=[r.meta["tool_call_id"] for r in refs if r.meta.get("tool_call_id")],
        archive_ids=[r.artifact_id for r in refs if r.kind == "archive"],
    )
    return JSONResponse({"artifacts": [{**r.to_dict(), "origin": _origin(r, found)} for r in refs]})


@router.get("/threads/{thread_id}/artifacts/{artifact_id}")
async def read_artifact(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    artifact_id: ArtifactIdPath,
    offset: OffsetRows = 0,
    limit: LimitRows = 100,
) -> Response:
    """One page of rows from `offset` (as `read_offloaded` pages), with `next_offset`."""
    checked = _checked_id(artifact_id)
    record = await require_thread(gateway, thread_id, identity)
    page = await artifact_store_for(gateway, record).aread_page(
        thread_id, checked, offset=offset, limit=limit, max_chars=DEFAULT_PAGE_CHARS
    )
    return JSONResponse(
        {
            "ref": page.ref.to_dict(),
            "offset": page.offset,
            "next_offset": page.next_offset,
            "rows": [
                {"index": r.index, "text": r.text, "continuation": r.continuation}
                for r in page.rows
            ],
        }
    )


@router.get("/threads/{thread_id}/artifacts/{artifact_id}/search")
async def search_artifact(
    gateway: GatewayDep,
    thread_id: ThreadIdDep,
    identity: IdentityDep,
    artifact_id: ArtifactIdPath,
    pattern: Pattern,
    regex: bool = False,
    max_matches: MaxMatches = 50,
) -> Response:
    """Rows matching `pattern` (a substring, or a Python regex with `regex=true`).

    A regex search waits briefly for one of `MAX_REGEX_SEARCHES` slots, else answers 429.
    """
    checked = _checked_id(artifact_id)
    record = await require_thread(gateway, thread_id, identity)
    _checked_pattern(pattern, regex=regex)
    async with _search_slot(gateway, regex=regex):
        result = await artifact_store_for(gateway, record).asearch(
            thread_id, checked, pattern, regex=regex, max_matches=max_matches
        )
    return JSONResponse(
        {
            "ref": result.ref.to_dict(),
            "pattern": result.pattern,
            "regex": result.regex,
            "complete": result.complete,
            "stopped_reason": result.stopped_reason,
            "matches": [
                {"row": m.row, "start": m.start, "end": m.end, "text": m.text}
                for m in result.matches
            ],
        }
    )
