"""`GET /health`: is the gateway up and can it reach its database."""

from __future__ import annotations

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

    body = {
        "status": "ok",
        "version": __version__,
        "storage": gateway.storage.backend,
        "assistants": gateway.agents.assistant_ids,
        "active_runs": len(gateway.runs.active),
    }
    try:
        await gateway.storage.ping()
        body["schema_version"] = await gateway.storage.schema_version()
    except StorageError as error:
        body.update(status="unavailable", detail=str(error))
        return JSONResponse(body, status_code=503)
    return JSONResponse(body)
