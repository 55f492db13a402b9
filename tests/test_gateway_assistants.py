"""Assistant routes through the official `langgraph_sdk` client against an in-process gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient

from foldwise.bench._serve import open_app
from foldwise.gateway._agents import assistant_uuid
from tests.support.gateway import gateway_config

MODELS = {
    "summarization": {"trigger": {"type": "messages", "value": 1000}},
    "models": [
        {"name": "main", "use": "foldwise.testing:ScriptedChatModel", "default": "from main"},
        {"name": "small", "use": "foldwise.testing:ScriptedChatModel", "default": "from small"},
    ],
}
READ_ONLY = {"detail": "assistants come from foldwise.yaml; edit the config"}


@asynccontextmanager
async def sdk(tmp_path: Path) -> AsyncIterator[LangGraphClient]:
    """The SDK client on an in-process gateway serving `agent`, `main` and `small`."""
    config = gateway_config(tmp_path, MODELS)
    async with open_app(config) as (http, _):
        yield LangGraphClient(http)


async def test_search_count_and_get(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        found = await client.assistants.search()
        assert [a["graph_id"] for a in found] == ["agent", "main", "small"]
        first = found[0]
        assert first["assistant_id"] == assistant_uuid("agent")
        assert set(first) >= {
            "assistant_id", "graph_id", "name", "config", "context", "metadata", "version",
            "created_at", "updated_at", "description",
        }  # fmt: skip
        assert first["version"] == 1 and first["config"] == {}
        assert await client.assistants.count() == 3
        assert await client.assistants.count(graph_id="small") == 1
        assert await client.assistants.count(name="AI") == 1
        assert await client.assistants.count(metadata={"source": "nope"}) == 0
        page = await client.assistants.search(limit=1, offset=1, response_format="object")
        assert [a["name"] for a in page["assistants"]] == ["main"] and page["next"] == "2"
        ordered = await client.assistants.search(sort_by="name", sort_order="desc")
        assert [a["name"] for a in ordered] == ["small", "main", "agent"]
        by_uuid = await client.assistants.get(assistant_uuid("small"))
        by_name = await client.assistants.get("small")
        assert by_uuid == by_name and by_name["assistant_id"] == assistant_uuid("small")


async def test_unknown_assistant_is_404(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        for call in (
            client.assistants.get("nope"),
            client.assistants.get_graph("nope"),
            client.assistants.get_schemas("nope"),
            client.assistants.get_subgraphs("nope"),
        ):
            with pytest.raises(httpx.HTTPStatusError) as raised:
                await call
            assert raised.value.response.status_code == 404
            assert "nope" in raised.value.response.json()["detail"]


async def test_graph_schemas_and_subgraphs(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        graph = await client.assistants.get_graph("agent")
        nodes = {n["id"] for n in graph["nodes"]}
        assert {"__start__", "model", "tools"} <= nodes and graph["edges"]
        xray = await client.assistants.get_graph(assistant_uuid("agent"), xray=True)
        assert {n["id"] for n in xray["nodes"]} >= nodes
        schemas = await client.assistants.get_schemas("main")
        assert schemas["graph_id"] == "main"
        for key in ("input_schema", "output_schema", "state_schema"):
            assert "messages" in schemas[key]["properties"], key
        assert "summary_text" in schemas["state_schema"]["properties"]
        assert set(schemas) == {
            "graph_id", "input_schema", "output_schema", "state_schema", "config_schema",
            "context_schema",
        }  # fmt: skip
        assert await client.assistants.get_subgraphs("agent") == {}


async def test_writes_are_405_with_a_clear_detail(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        for call in (
            client.assistants.create("agent"),
            client.assistants.update("agent", metadata={"a": 1}),
            client.assistants.delete("agent"),
            client.assistants.get_versions("agent"),
            client.assistants.set_latest("agent", 2),
        ):
            with pytest.raises(httpx.HTTPStatusError) as raised:
                await call
            assert raised.value.response.status_code == 405
            assert raised.value.response.json() == READ_ONLY


async def test_runs_accept_the_assistant_uuid(tmp_path: Path) -> None:
    async with sdk(tmp_path) as client:
        thread = await client.threads.create()
        result = await client.runs.wait(
            thread["thread_id"],
            assistant_uuid("small"),
            input={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert isinstance(result, dict) and result["messages"][-1]["content"] == "from small"
        # The thread remembers its assistant: later reads use the `small` agent, not the default.
        context = await client.http.get(f"/threads/{thread['thread_id']}/context")
        assert context["model_name"] == "small"
