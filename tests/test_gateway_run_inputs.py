"""Run inputs driven with `langgraph_sdk`: checkpoints (head and fork), `command`, `input: null`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import interrupt
from langgraph_sdk.client import LangGraphClient

from foldwise.bench._serve import open_app
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory, user

QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}


@asynccontextmanager
async def sdk_gateway(tmp_path: Path, factory: Any) -> AsyncIterator[LangGraphClient]:
    """The official SDK client talking to an in-process gateway."""
    async with open_app(gateway_config(tmp_path, QUIET), factory) as (_, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=30
        ) as http:
            yield LangGraphClient(http)


def contents(values: Any) -> list[str]:
    return [str(m["content"]) for m in values["messages"]]


async def transcript(client: LangGraphClient, thread_id: str) -> list[str]:
    entries = await client.http.get(f"/threads/{thread_id}/transcript", params={"limit": 100})
    rows = entries["entries"]
    return [str(e["message"]["content"]) for e in rows if e["kind"] == "message"]


def numbered() -> ScriptedChatModel:
    count = 0

    def brain(messages: list[BaseMessage]) -> str:
        nonlocal count
        count += 1
        return f"answer {count} to {messages[-1].content}"

    return ScriptedChatModel(default=brain)


async def test_head_checkpoint_runs_and_earlier_checkpoint_forks(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("one"))
        head = await client.threads.get_state(thread)
        # agent-chat-ui sends the head checkpoint with every message once a thread has history.
        second = await client.runs.wait(
            thread, "agent", input=user("two"), checkpoint=head["checkpoint"]
        )
        assert contents(second) == ["one", "answer 1 to one", "two", "answer 2 to two"]
        # Edit "two": fork from the checkpoint before it was added (first run's last one).
        history = await client.threads.get_history(thread, limit=50)
        before_two = next(s for s in history if contents(s["values"])[-1] == "answer 1 to one")
        forked = await client.runs.wait(
            thread,
            "agent",
            input=user("TWO"),
            checkpoint_id=before_two["checkpoint"]["checkpoint_id"],
        )
        assert contents(forked) == ["one", "answer 1 to one", "TWO", "answer 3 to TWO"]
        state = await client.threads.get_state(thread)
        assert contents(state["values"]) == contents(forked)
        # The transcript is append-only: the abandoned branch stays, the fork is added once.
        assert await transcript(client, thread) == [
            "one",
            "answer 1 to one",
            "two",
            "answer 2 to two",
            "TWO",
            "answer 3 to TWO",
        ]


async def test_input_null_from_an_earlier_checkpoint_regenerates(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("one"))
        history = await client.threads.get_history(thread, limit=50)
        # agent-chat-ui's regenerate: the checkpoint before the answer, no input.
        before_answer = next(s for s in history if s["next"] and contents(s["values"]) == ["one"])
        again = await client.runs.wait(
            thread, "agent", input=None, checkpoint=before_answer["checkpoint"]
        )
        assert contents(again) == ["one", "answer 2 to one"]
        assert await transcript(client, thread) == ["one", "answer 1 to one", "answer 2 to one"]
        runs = await client.runs.list(thread)
        assert [r["status"] for r in runs] == ["success", "success"]


async def test_command_resume_answers_an_interrupt(tmp_path: Path) -> None:
    @tool
    def deploy(target: str) -> str:
        """Deploy after a human approves."""
        answer = interrupt({"question": f"deploy {target}?"})
        return f"deployed {target}" if answer == "yes" else "cancelled"

    def brain(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"result: {messages[-1].content}")
        return AIMessage(
            "", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": "c1"}]
        )

    factory = scripted_factory(ScriptedChatModel(default=brain), tools=[deploy])
    async with sdk_gateway(tmp_path, factory) as client:
        thread = (await client.threads.create())["thread_id"]
        paused = await client.runs.wait(thread, "agent", input=user("ship it"))
        assert paused["__interrupt__"][0]["value"] == {"question": "deploy prod?"}
        state = await client.threads.get_state(thread)
        assert state["next"] == ["tools"]
        done = await client.runs.wait(thread, "agent", command={"resume": "yes"})
        assert contents(done)[-2:] == ["deployed prod", "result: deployed prod"]
        assert "__interrupt__" not in done
        runs = await client.runs.list(thread)
        assert [r["status"] for r in runs] == ["success", "interrupted"]  # newest first
        # input: null continues nothing on a finished thread, and changes nothing.
        same = await client.runs.wait(thread, "agent", input=None)
        assert contents(same) == contents(done)


async def test_command_update_messages_are_validated_and_recorded(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("one"))
        values = await client.runs.wait(
            thread,
            "agent",
            command={"update": {"messages": [{"role": "user", "content": "two"}]}, "goto": "model"},
        )
        assert contents(values)[-2:] == ["two", "answer 2 to two"]
        assert (await transcript(client, thread))[-2:] == ["two", "answer 2 to two"]


async def test_input_null_on_a_new_thread_is_422(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        with pytest.raises(httpx.HTTPStatusError) as caught:
            await client.runs.wait(thread, "agent", input=None)
        assert caught.value.response.status_code == 422
        assert "input" in caught.value.response.text


async def test_a_fork_before_a_compaction_sees_the_messages_it_had(tmp_path: Path) -> None:
    compacting = {
        "summarization": {
            "trigger": {"type": "messages", "value": 4},
            "keep": {"type": "messages", "value": 1},
            "min_gain_tokens": 0,
            "preserve_human": {"mode": "latest"},
        }
    }

    def brain(messages: list[BaseMessage]) -> str:
        return "SUMMARY" if is_summarizer_call(messages) else f"re: {messages[-1].content}"

    factory = scripted_factory(ScriptedChatModel(default=brain))
    config = gateway_config(tmp_path, compacting)
    async with open_app(config, factory) as (_, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            client = LangGraphClient(http)
            thread = (await client.threads.create())["thread_id"]
            for text in ("one", "two", "three"):
                await client.runs.wait(thread, "agent", input=user(text))
            head = await client.threads.get_state(thread)
            assert head["values"]["compactions"], "the thread should have compacted"
            before = await transcript(client, thread)
            history = await client.threads.get_history(thread, limit=100)
            early = next(
                s
                for s in history
                if not s["values"].get("compactions")
                and contents(s["values"]) == ["one", "re: one"]
            )
            forked = await client.runs.wait(
                thread, "agent", input=user("edit"), checkpoint=early["checkpoint"]
            )
            assert contents(forked) == ["one", "re: one", "edit", "re: edit"]
            assert not forked.get("compactions")
            after = await transcript(client, thread)
            assert after[: len(before)] == before  # append-only
            assert after[len(before) :] == ["edit", "re: edit"]


async def test_editing_the_first_message_forks_from_the_first_checkpoint(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("one"))
        await client.runs.wait(thread, "agent", input=user("two"))
        history = await client.threads.get_history(thread, limit=50)
        # agent-chat-ui edits a message from the parent of the state where it first appears.
        first_seen = [s for s in history if contents(s["values"] or {"messages": []}) == ["one"]]
        parent = first_seen[-1]["parent_checkpoint"]
        forked = await client.runs.wait(thread, "agent", input=user("ONE"), checkpoint=parent)
        assert contents(forked) == ["ONE", "answer 3 to ONE"]
        assert (await transcript(client, thread))[-2:] == ["ONE", "answer 3 to ONE"]


async def test_commands_that_would_skip_context_management_are_refused(tmp_path: Path) -> None:
    async with sdk_gateway(tmp_path, scripted_factory(numbered())) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "agent", input=user("one"))
        for command, field in [
            ({"goto": "tools"}, "command.goto"),
            ({"goto": "nope"}, "command.goto"),
            ({"goto": "__end__"}, "command.goto"),
            ({}, "command"),
            ({"resume": None}, "command"),
            ({"update": None}, "command"),
        ]:
            # Raw HTTP: the SDK drops an empty command instead of sending it.
            with pytest.raises(httpx.HTTPStatusError) as caught:
                await client.http.post(
                    f"/threads/{thread}/runs/wait",
                    json={"assistant_id": "agent", "command": command},
                )
            response = caught.value.response
            assert response.status_code == 422, (command, response.text)
            assert response.json()["detail"].startswith(f"{field}:"), response.text
