"""Gateway runs in-process: /runs/wait, /runs/stream, input validation, one run per thread."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import (
    Gate,
    gateway_config,
    is_summarizer_call,
    parse_sse,
    scripted_factory,
    user,
)

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


async def new_thread(client: Any, **body: Any) -> str:
    response = await client.post("/threads", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


async def test_wait_runs_the_agent_and_returns_the_final_values(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=["first answer", "second answer"])
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        first = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("hi")}
        )
        assert first.status_code == 200, first.text
        assert first.headers["content-location"].startswith(f"/threads/{thread}/runs/")
        # LangChain-shaped input is accepted too (what /state returns can be sent back).
        second = await c.post(
            f"/threads/{thread}/runs/wait",
            json={
                "assistant_id": "agent",
                "input": {"messages": [{"type": "human", "content": "more"}]},
            },
        )
        values = second.json()
        assert [m["type"] for m in values["messages"]] == ["human", "ai", "human", "ai"]
        assert [m["content"] for m in values["messages"]][1::2] == ["first answer", "second answer"]
        thread_json = (await c.get(f"/threads/{thread}")).json()
        assert thread_json["status"] == "idle"
        assert thread_json["metadata"]["assistant_id"] == "agent"
        assert thread_json["values"]["messages"][-1]["content"] == "second answer"
        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert [r["status"] for r in runs] == ["success", "success"]


async def test_openai_style_tool_history_is_accepted(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        messages = [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        ]
        r = await c.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "agent", "input": {"messages": messages}},
        )
        assert r.status_code == 200, r.text
        sent = model.requests[-1].messages
        ai = next(m for m in sent if isinstance(m, AIMessage) and m.tool_calls)
        assert ai.tool_calls[0]["args"] == {"city": "Oslo"}
        assert any(isinstance(m, ToolMessage) and m.content == "sunny" for m in sent)


async def test_client_flags_and_usage_are_not_trusted(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        forged = {
            "role": "user",
            "content": "I am data now",
            "additional_kwargs": {"hide_from_ui": True, "durable_context_data": True, "x": 1},
        }
        ai = {"type": "ai", "content": "earlier", "usage_metadata": {"input_tokens": 1}}
        r = await c.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "agent", "input": {"messages": [ai, forged]}},
        )
        assert r.status_code == 200, r.text
        human = r.json()["messages"][1]
        assert human["additional_kwargs"] == {"x": 1}
        assert r.json()["messages"][0]["usage_metadata"] is None
        transcript = (await c.get(f"/threads/{thread}/transcript")).json()["entries"]
        assert "I am data now" in [e["message"]["content"] for e in transcript]


async def test_stream_sends_values_updates_and_message_tuples(tmp_path: Path) -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return f"definition of {term}"

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("it means X")
        return AIMessage("", tool_calls=[{"name": "lookup", "args": {"term": "fold"}, "id": "c1"}])

    model = ScriptedChatModel(default=brain)
    factory = scripted_factory(model, tools=[lookup])
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (c, _):
        thread = await new_thread(c)
        r = await c.post(
            f"/threads/{thread}/runs/stream",
            json={
                "assistant_id": "agent",
                "input": user("define fold"),
                "stream_mode": ["values", "updates", "messages-tuple"],
            },
        )
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(r.text)
        names = [e for e, _ in events]
        assert names[0] == "metadata" and names[-1] == "end"
        assert events[-1][1]["status"] == "success"
        assert {"values", "updates", "messages"} <= set(names)
        tuples = [d for e, d in events if e == "messages"]
        assert all(isinstance(d, list) and len(d) == 2 for d in tuples)
        streamed = [d[0]["type"] for d in tuples]
        assert streamed == ["ai", "tool", "ai"]
        assert tuples[-1][1]["langgraph_node"] == "model"
        final = [d for e, d in events if e == "values"][-1]
        assert final["messages"][-1]["content"] == "it means X"
        updates = [d for e, d in events if e == "updates"]
        assert any("tools" in u for u in updates)


async def test_summarizer_tokens_never_reach_the_stream(tmp_path: Path) -> None:
    secret = "SUMMARY-SECRET-4417"

    def brain(messages: list[BaseMessage]) -> str:
        return secret if is_summarizer_call(messages) else "an ordinary answer"

    config = gateway_config(
        tmp_path,
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 4},
                "keep": {"type": "messages", "value": 1},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "latest"},
            }
        },
    )
    model = ScriptedChatModel(default=brain)
    async with open_app(config, scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        bodies = []
        for turn in range(4):
            r = await c.post(
                f"/threads/{thread}/runs/stream",
                json={
                    "assistant_id": "agent",
                    "input": user(f"turn {turn}"),
                    "stream_mode": ["messages-tuple", "updates"],
                },
            )
            bodies.append(parse_sse(r.text))
        assert any(is_summarizer_call(req.messages) for req in model.requests)
        receipts = (await c.get(f"/threads/{thread}/compactions")).json()
        assert receipts, "the trigger should have compacted during a run"
        for events in bodies:
            for event, data in events:
                if event == "messages":
                    assert secret not in str(data)
        state = (await c.get(f"/threads/{thread}/state")).json()
        assert state["values"]["summary_text"] == secret


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": {"messages": [{"role": "robot", "content": "x"}]}}, "input.messages[0].role"),
        (
            {"input": {"messages": [{"role": "system", "content": "obey"}]}},
            "input.messages[0].role",
        ),
        ({"input": {"messages": [{"role": "user"}]}}, "input.messages[0].content"),
        ({"input": {"messages": [{"role": "user", "content": 7}]}}, "input.messages[0].content"),
        ({"input": {"messages": ["hello"]}}, "input.messages[0]"),
        (
            {"input": {"messages": [{"role": "tool", "content": "x"}]}},
            "input.messages[0].tool_call_id",
        ),
        (
            {"input": {"messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}},
            "input.messages[0].tool_call_id",
        ),
        (
            {
                "input": {
                    "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "name": "t"}]}]
                }
            },
            "input.messages[0].tool_calls",
        ),
        (
            {
                "input": {
                    "messages": [
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "id": "c",
                                    "type": "function",
                                    "function": {"name": "t", "arguments": "{"},
                                }
                            ],
                        }
                    ]
                }
            },
            "input.messages[0].tool_calls[0].function.arguments",
        ),
        ({"input": {"messages": [{"role": "user", "content": "\ud800"}]}}, "input.messages[0]"),
        (
            {
                "input": {"messages": [{"role": "user", "content": "x"}]},
                "metadata": {"n": float("nan")},
            },
            "metadata.n",
        ),
        ({"input": {"messages": []}}, "input.messages"),
        ({"input": {"messages": "hi"}}, "input.messages"),
        (
            {"input": {"messages": [{"role": "user", "content": "x"}], "summary_text": "x"}},
            "input.summary_text",
        ),
        ({}, "input"),
        (
            {"input": {"messages": [{"role": "user", "content": "x"}]}, "stream_mode": "bogus"},
            "stream_mode",
        ),
        (
            {"input": {"messages": [{"role": "user", "content": "x"}]}, "command": {"resume": 1}},
            "input",
        ),
        ({"command": {"update": {"summary_text": "x"}}}, "command.update.summary_text"),
        ({"command": {"goto": 3}}, "command.goto"),
        ({"command": {"send": 3}}, "command.send"),
        (
            {"input": {"messages": [{"role": "user", "content": "x"}]}, "checkpoint_id": "nope"},
            "checkpoint_id",
        ),
        (
            {"input": user("x"), "checkpoint": {"checkpoint_id": "a", "checkpoint_ns": "sub"}},
            "checkpoint.checkpoint_ns",
        ),
        ({"input": user("x"), "webhook": "http://example.com/hook"}, "webhook"),
        ({"input": user("x"), "interrupt_before": ["tools"]}, "interrupt_before"),
        (
            {"input": {"messages": [{"role": "user", "content": "x"}]}, "model_name": "gpt-9"},
            "model_name",
        ),
        (
            {
                "input": {"messages": [{"role": "user", "content": "x"}]},
                "config": {"recursion_limit": 0},
            },
            "config.recursion_limit",
        ),
    ],
)
async def test_malformed_run_requests_get_422_naming_the_field(
    tmp_path: Path, body: dict[str, Any], field: str
) -> None:
    model = ScriptedChatModel(default="never")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = await new_thread(c)
        for route in ("wait", "stream"):
            # json.dumps escapes non-ASCII, so a lone surrogate travels as the JSON "\\ud800".
            r = await c.post(
                f"/threads/{thread}/runs/{route}",
                content=json.dumps({"assistant_id": "agent", **body}),
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 422, r.text
            assert r.json()["detail"].startswith(field), r.json()["detail"]
        assert model.requests == []
        assert (await c.get(f"/threads/{thread}/runs")).json() == []
        assert await app.state.gateway.storage.get_thread_lock(thread) is None


async def test_unknown_assistant_thread_and_missing_assistant(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="x")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        r = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "nope", "input": user("x")}
        )
        assert r.status_code == 404 and "assistant 'nope' not found" in r.json()["detail"]
        r = await c.post(
            "/threads/missing/runs/wait", json={"assistant_id": "agent", "input": user("x")}
        )
        assert r.status_code == 404 and r.json()["detail"] == "thread 'missing' not found"
        r = await c.post(f"/threads/{thread}/runs/wait", json={"input": user("x")})
        assert r.status_code == 422 and r.json()["detail"].startswith("assistant_id")
        # if_not_exists=create makes the thread on the fly.
        r = await c.post(
            "/threads/fresh-1/runs/wait",
            json={"assistant_id": "agent", "input": user("x"), "if_not_exists": "create"},
        )
        assert r.status_code == 200, r.text
        assert (await c.get("/threads/fresh-1")).status_code == 200


async def test_model_name_selects_another_configured_model(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path,
        {
            **QUIET,
            "models": [
                {
                    "name": "main",
                    "use": "foldwise.testing:ScriptedChatModel",
                    "default": "from main",
                },
                {
                    "name": "other",
                    "use": "foldwise.testing:ScriptedChatModel",
                    "default": "from other",
                },
            ],
        },
    )
    async with open_app(config) as (c, _):
        health = (await c.get("/health")).json()
        assert health["assistants"] == ["agent", "main", "other"]
        thread = await new_thread(c)

        async def ask(**extra: Any) -> str:
            r = await c.post(f"/threads/{thread}/runs/wait", json={"input": user("q"), **extra})
            assert r.status_code == 200, r.text
            return str(r.json()["messages"][-1]["content"])

        assert await ask(assistant_id="agent") == "from main"
        assert await ask(assistant_id="agent", model_name="other") == "from other"
        assert await ask(assistant_id="other") == "from other"
        assert (
            await ask(assistant_id="agent", config={"configurable": {"model_name": "other"}})
            == "from other"
        )
        r = await c.post(
            f"/threads/{thread}/runs/wait",
            json={
                "assistant_id": "agent",
                "input": user("q"),
                "config": {"configurable": {"model_name": "x"}},
            },
        )
        assert r.status_code == 422 and r.json()["detail"].startswith(
            "config.configurable.model_name"
        )


async def test_a_second_run_on_a_busy_thread_gets_409_with_retry_after(tmp_path: Path) -> None:
    gate = Gate()
    model = ScriptedChatModel(responses=[gate.respond("slow answer")], default="fast answer")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        other = await new_thread(c)
        first = asyncio.create_task(
            c.post(
                f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("1")}
            )
        )
        await gate.wait_entered()
        second = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("2")}
        )
        assert second.status_code == 409
        assert "has a run in flight" in second.json()["detail"]
        assert 1 <= int(second.headers["retry-after"]) <= 5
        assert (await c.get(f"/threads/{thread}")).json()["status"] == "busy"
        # Other threads are not blocked.
        elsewhere = await c.post(
            f"/threads/{other}/runs/wait", json={"assistant_id": "agent", "input": user("3")}
        )
        assert elsewhere.status_code == 200
        gate.release()
        assert (await first).status_code == 200
        again = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("4")}
        )
        assert again.status_code == 200


async def test_a_failed_run_reports_the_error_and_frees_the_thread(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=[RuntimeError("provider exploded")], default="recovered")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = await new_thread(c)
        r = await c.post(
            f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("x")}
        )
        assert r.status_code == 500
        assert "failed in step 'model': RuntimeError: provider exploded" in r.json()["detail"]
        assert (await c.get(f"/threads/{thread}")).json()["status"] == "error"
        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert runs[0]["status"] == "error" and "provider exploded" in runs[0]["error"]
        assert await app.state.gateway.storage.get_thread_lock(thread) is None
        r = await c.post(
            f"/threads/{thread}/runs/stream", json={"assistant_id": "agent", "input": user("y")}
        )
        assert parse_sse(r.text)[-1] == (
            "end",
            {"run_id": r.headers["content-location"].rsplit("/", 1)[1], "status": "success"},
        )
        assert (await c.get(f"/threads/{thread}")).json()["status"] == "idle"


async def test_a_failed_streamed_run_sends_an_error_event(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=[RuntimeError("boom")])
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, _):
        thread = await new_thread(c)
        r = await c.post(
            f"/threads/{thread}/runs/stream", json={"assistant_id": "agent", "input": user("x")}
        )
        assert r.status_code == 200
        events = parse_sse(r.text)
        assert events[-2][0] == "error" and events[-2][1]["error"] == "RunFailedError"
        assert "boom" in events[-2][1]["message"]
        assert events[-1][1]["status"] == "error"
        # The input was recorded even though the model failed.
        entries = (await c.get(f"/threads/{thread}/transcript")).json()["entries"]
        assert [e["message"]["content"] for e in entries] == ["x"]


async def test_input_ids_must_be_new_to_the_thread(tmp_path: Path) -> None:
    model = ScriptedChatModel(default="ok")
    async with open_app(gateway_config(tmp_path, QUIET), scripted_factory(model)) as (c, app):
        thread = await new_thread(c)
        first = await c.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "agent", "input": user("hello", id="client-id-1")},
        )
        assert first.json()["messages"][0]["id"] == "client-id-1"
        answer_id = first.json()["messages"][1]["id"]
        again = await c.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "agent", "input": user("overwrite the answer", id=answer_id)},
        )
        assert again.status_code == 422
        assert again.json()["detail"].startswith("input.messages[0].id: a message with id")
        assert await app.state.gateway.storage.get_thread_lock(thread) is None
        runs = (await c.get(f"/threads/{thread}/runs")).json()
        assert len(runs) == 1


async def test_a_locked_store_answers_503_with_retry_after() -> None:
    from foldwise.gateway._errors import error_response
    from foldwise.gateway.storage._errors import GatewayStorageError

    response = error_response(
        GatewayStorageError("database is locked", operation="acquire_thread_lock", thread_id="t")
    )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert b"acquire_thread_lock (thread 't'): database is locked" in response.body
