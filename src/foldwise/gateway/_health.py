"""`GET /health` (is the gateway up, can it reach its database), `GET /ok`, `GET /info`."""

from __future__ import annotations

import os

from fastapi import APIRouter, Response

from foldwise.errors import StorageError
from foldwise.gateway._deps import GatewayDep
from foldwise.gateway._serde import JSONResponse

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(gateway: GatewayDep) -> Response:
    """200 `{"status": "ok", ...}` when storage answers, 503 `{"status": "unavailable"}` if not."""
    from foldwise import __version__

    # Public even with auth on: then it says only whether the gateway is up, nothing about
    # other identities' activity, the agents or the storage.
    detailed = not gateway.config.gateway.auth.enabled
    body: dict[str, object] = {"status": "ok"}
    if detailed:
        body.update(
            version=__version__,
            storage=gateway.storage.backend,
            assistants=gateway.agents.assistant_ids,
            active_runs=len(gateway.runs.active),
            # Which worker process answered (`foldwise serve --workers N`): runs in flight
            # are per process, so `active_runs` is this worker's count.
            worker_pid=os.getpid(),
        )
    try:
        await gateway.storage.ping()
        if detailed:
            body["schema_version"] = await gateway.storage.schema_version()
    except StorageError as error:
        body["status"] = "unavailable"
        if detailed:
            body["detail"] = str(error)
        return JSONResponse(body, status_code=503)
    return JSONResponse(body)


@router.get("/ok")
async def ok() -> Response:
    """200 `{"ok": true}`: the process answers (LangGraph Server's liveness probe; no storage)."""
    return JSONResponse({"ok": True})


@router.get("/info")
async def info() -> Response:
    """Server info in LangGraph Server's shape: `version` and feature `flags` (public)."""
    from importlib.metadata import PackageNotFoundError, version

    from foldwise import __version__

    try:
        langgraph_version: str | None = version("langgraph")
    except PackageNotFoundError:  # pragma: no cover - langgraph is a dependency
        langgraph_version = None
    body = {
        "version": __version__,
        "langgraph_py_version": langgraph_version,
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "foldwise": {"version": __version__},
    }
    return JSONResponse(body)
