"""Assistant routes, LangGraph-Server shaped: the configured agents, read-only.

Each served assistant (`agent`, then every configured model name) is a LangGraph `Assistant`
whose `assistant_id` is a stable UUID (uuid5 of the name, the same on every worker and after a
restart); the name itself is accepted wherever an id is. `graph_id` and `name` are the name.
`foldwise.yaml` is the source of truth: creating, updating, deleting and versioning assistants
answer 405 with a `detail` saying so.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import Field, TypeAdapter

from foldwise.gateway._agents import DEFAULT_ASSISTANT, assistant_uuid
from foldwise.gateway._deps import Gateway, GatewayDep
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import MAX_OFFSET, MAX_PAGE, _LangGraphBody
from foldwise.gateway._serde import JSONResponse, jsonable

__all__ = ["AssistantCount", "AssistantSearch", "router"]

logger = logging.getLogger(__name__)

router = APIRouter(tags=["assistants"])

READ_ONLY_DETAIL = "assistants come from foldwise.yaml; edit the config"

AssistantIdPath = Annotated[str, Path(min_length=1, max_length=128)]


class AssistantCount(_LangGraphBody):
    """`POST /assistants/count`."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None


class AssistantSearch(AssistantCount):
    """`POST /assistants/search`."""

    limit: int = Field(default=10, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


def _assistant_json(gateway: Gateway, name: str) -> dict[str, Any]:
    created = gateway.agents.loaded_at.isoformat()
    model = None if name == DEFAULT_ASSISTANT else name
    return {
        "assistant_id": assistant_uuid(name),
        "graph_id": name,
        "name": name,
        "description": (
            "the foldwise agent on the default model"
            if model is None
            else f"the foldwise agent on the model {model!r}"
        ),
        "config": {},
        "context": {},
        "metadata": {"created_by": "system", "source": "foldwise.yaml"},
        "version": 1,
        "created_at": created,
        "updated_at": created,
    }


def _matching(gateway: Gateway, body: AssistantCount) -> list[dict[str, Any]]:
    check_values(body.metadata, "metadata")
    wanted = body.metadata or {}
    out = []
    for name in gateway.agents.assistant_ids:
        item = _assistant_json(gateway, name)
        if body.graph_id is not None and item["graph_id"] != body.graph_id:
            continue
        if body.name is not None and body.name.lower() not in name.lower():
            continue
        if any(item["metadata"].get(k) != v for k, v in wanted.items()):
            continue
        out.append(item)
    return out


@router.post("/assistants/search")
async def search_assistants(gateway: GatewayDep, body: AssistantSearch | None = None) -> Response:
    """The served assistants matching `graph_id`, `name` (substring) and `metadata`."""
    body = body or AssistantSearch()
    found = _matching(gateway, body)
    if body.sort_by is not None:
        found.sort(key=lambda a: str(a[body.sort_by or "name"]), reverse=body.sort_order == "desc")
    page = found[body.offset : body.offset + body.limit]
    headers = {}
    if body.offset + body.limit < len(found):
        headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return JSONResponse(page, headers=headers)


@router.post("/assistants/count")
async def count_assistants(gateway: GatewayDep, body: AssistantCount | None = None) -> Response:
    """How many served assistants match the filters."""
    return JSONResponse(len(_matching(gateway, body or AssistantCount())))


@router.get("/assistants/{assistant_id}")
async def get_assistant(gateway: GatewayDep, assistant_id: AssistantIdPath) -> Response:
    """One assistant, by its UUID or its name (404 if neither)."""
    return JSONResponse(_assistant_json(gateway, gateway.agents.canonical(assistant_id)))


@router.get("/assistants/{assistant_id}/graph")
async def get_assistant_graph(
    gateway: GatewayDep,
    assistant_id: AssistantIdPath,
    xray: Annotated[int | bool, Query()] = False,
) -> Response:
    """The agent's graph as drawable JSON (`nodes`, `edges`), as LangGraph Server draws it."""
    graph = gateway.agents.get(gateway.agents.canonical(assistant_id)).graph
    drawable = graph.get_graph(xray=xray)
    return JSONResponse(jsonable(drawable.to_json()))


def _schema(build: Callable[[], Any], what: str) -> dict[str, Any] | None:
    # LangGraph Server leaves a schema out when it cannot be generated; so do we.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # get_config_jsonschema is deprecated in V1
            value = build()
    except Exception as error:
        logger.debug("no %s JSON schema: %s", what, error)
        return None
    return value if isinstance(value, dict) else None


def graph_schemas(name: str, graph: Any) -> dict[str, Any]:
    """A graph's `GraphSchema` (`langgraph_sdk.schema.GraphSchema`)."""
    return {
        "graph_id": name,
        "input_schema": _schema(graph.get_input_jsonschema, "input"),
        "output_schema": _schema(graph.get_output_jsonschema, "output"),
        "state_schema": _schema(
            lambda: TypeAdapter(graph.builder.state_schema).json_schema(), "state"
        ),
        "config_schema": _schema(graph.get_config_jsonschema, "config"),
        "context_schema": _schema(graph.get_context_jsonschema, "context"),
    }


@router.get("/assistants/{assistant_id}/schemas")
async def get_assistant_schemas(gateway: GatewayDep, assistant_id: AssistantIdPath) -> Response:
    """JSON schemas of the agent's input, output, state, config and context."""
    name = gateway.agents.canonical(assistant_id)
    return JSONResponse(graph_schemas(name, gateway.agents.get(name).graph))


@router.get("/assistants/{assistant_id}/subgraphs")
@router.get("/assistants/{assistant_id}/subgraphs/{namespace}")
async def get_assistant_subgraphs(
    gateway: GatewayDep, assistant_id: AssistantIdPath, namespace: str | None = None
) -> Response:
    """The agent's subgraphs: none (a foldwise agent is one graph)."""
    gateway.agents.canonical(assistant_id)
    return JSONResponse({})


def _read_only() -> Response:
    return JSONResponse({"detail": READ_ONLY_DETAIL}, status_code=405, headers={"Allow": "GET"})


@router.post("/assistants", include_in_schema=False)
async def create_assistant() -> Response:
    """Refused: assistants come from the configuration."""
    return _read_only()


@router.patch("/assistants/{assistant_id}", include_in_schema=False)
@router.delete("/assistants/{assistant_id}", include_in_schema=False)
async def change_assistant(assistant_id: str) -> Response:
    """Refused: assistants come from the configuration."""
    return _read_only()


@router.post("/assistants/{assistant_id}/versions", include_in_schema=False)
@router.post("/assistants/{assistant_id}/latest", include_in_schema=False)
async def assistant_versions(assistant_id: str) -> Response:
    """Refused: assistants come from the configuration (there is one version)."""
    return _read_only()
