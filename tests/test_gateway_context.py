"""`GET /threads/{id}/context`: the next request's token usage, by part, with thresholds."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from foldwise.bench._serve import open_app
from foldwise.compaction import decide_compaction
from foldwise.durable import inject_durable_context, render_sections
from foldwise.gateway import HostedAgent
from foldwise.testing import ScriptedChatModel
from foldwise.tokens import get_counter
from tests.support.gateway import gateway_config, is_summarizer_call, scripted_factory, user

SYSTEM = "You review proposals for the data platform team. Be precise."


@tool
def search_corpus(query: str) -> str:
    """Search the document corpus for passages about a query."""
    return "passage"


async def test_context_splits_the_next_request_and_shows_thresholds(tmp_path: Path) -> None:
    def brain(messages: list[BaseMessage]) -> str:
        return (
            "SUMMARY: the user asked three questions."
            if is_summarizer_call(messages)
            else "answer " * 40
        )

    config = gateway_config(
        tmp_path,
        {
            "models": [
                {
                    "name": "main",
                    "use": "foldwise.testing:ScriptedChatModel",
                    "context_window": 20000,
                }
            ],
            "summarization": {
                "trigger": [{"type": "fraction", "value": 0.5}, {"type": "messages", "value": 100}],
                "keep": {"type": "messages", "value": 2},
                "min_gain_tokens": 0,
                "reserved_output_tokens": 1000,
            },
        },
    )

    def factory(request: object) -> object:
        import foldwise
        from foldwise.gateway import HostedAgent

        graph = foldwise.create_agent(
            config,
            model="main",
            tools=[search_corpus],
            checkpointer=request.checkpointer,  # type: ignore[attr-defined]
            system_prompt=SYSTEM,
        )
        model = foldwise.agent.find_summarization(graph).registry.get("main")  # type: ignore[union-attr]
        model.default = brain  # type: ignore[attr-defined]
        return HostedAgent(graph, system_prompt=SYSTEM)

    async with open_app(config, factory) as (c, _):
        await c.post("/threads", json={"thread_id": "ctx"})
        for i in range(3):
            await c.post(
                "/threads/ctx/runs/wait",
                json={"assistant_id": "agent", "input": user(f"question {i}")},
            )
        report = (await c.get("/threads/ctx/context")).json()
        counter = get_counter()
        tokens = report["tokens"]
        assert tokens["system"] == counter.count_message(SystemMessage(SYSTEM)) > 0
        assert tokens["tools"] > 0  # search_corpus plus the offload read/search tools
        assert tokens["durable_context"] == 0 and tokens["summary"] == 0
        assert tokens["messages"] > 0
        assert tokens["estimated_total"] == sum(
            tokens[k] for k in ("system", "tools", "durable_context", "messages")
        )
        assert report["window"] == 20000 and report["budget_limit"] == 19000
        assert report["triggers"] == [
            {
                "type": "fraction",
                "value": 0.5,
                "limit": 10000,
                "description": "fraction 50% >= 10000 tokens",
            },
            {"type": "messages", "value": 100, "limit": 100, "description": "messages >= 100"},
        ]
        assert report["keep"] == {"type": "messages", "value": 2}
        assert report["next_call"]["compacts"] is False
        assert report["next_call"]["skip_reason"] == "below_threshold"
        assert 0 < report["fraction_of_window"] < 0.5

        compact = await c.post("/threads/ctx/compact", json={})
        assert compact.json()["compacted"] is True
        after = (await c.get("/threads/ctx/context")).json()
        state = (await c.get("/threads/ctx/state")).json()["values"]
        # The summary and the archive of the compacted span (searchable, verbatim).
        assert [o["kind"] for o in state["offloads"]] == ["archive"]
        block, _ = inject_durable_context(
            [],
            render_sections({"summary_text": state["summary_text"], "offloads": state["offloads"]}),
        )
        expected = sum(counter.count_message(m) for m in block)
        assert after["tokens"]["durable_context"] == expected > 0
        assert after["tokens"]["summary"] == counter.count_text(state["summary_text"])
        assert after["tokens"]["messages"] < tokens["messages"]
        assert after["message_count"] == len(state["messages"])


async def test_context_predicts_the_next_compaction(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path,
        {
            "summarization": {
                "trigger": {"type": "messages", "value": 4},
                "keep": {"type": "messages", "value": 1},
                "min_gain_tokens": 0,
                "preserve_human": {"mode": "none"},
            }
        },
    )
    model = ScriptedChatModel(default="reply " * 30)
    async with open_app(config, scripted_factory(model)) as (c, _):
        await c.post("/threads", json={"thread_id": "p"})
        await c.post("/threads/p/runs/wait", json={"assistant_id": "agent", "input": user("one")})
        first = (await c.get("/threads/p/context")).json()
        assert first["next_call"]["compacts"] is False and first["window"] is None
        await c.post("/threads/p/runs/wait", json={"assistant_id": "agent", "input": user("two")})
        second = (await c.get("/threads/p/context")).json()
        assert second["message_count"] == 4
        assert second["next_call"]["compacts"] is True
        assert second["next_call"]["trigger"] == "messages"
        assert (await c.get("/threads/p/context", params={"model_name": "nope"})).status_code == 422


class ProbeAgent(HostedAgent):
    """Records the thread that reads the agent's tools (`context_report` does, while planning)."""

    def bound_tools(self) -> list[Any]:
        PROBE.append(threading.get_ident())
        return super().bound_tools()


PROBE: list[int] = []


def _probe_factory(model: ScriptedChatModel) -> Any:
    inner = scripted_factory(model)

    def factory(request: Any) -> HostedAgent:
        hosted = inner(request)
        return ProbeAgent(hosted.graph, system_prompt=hosted.system_prompt)

    return factory


async def test_context_is_read_only_and_measures_off_the_event_loop(tmp_path: Path) -> None:
    config = gateway_config(
        tmp_path, {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
    )
    model = ScriptedChatModel(default="an answer", usage=True)
    async with open_app(config, _probe_factory(model)) as (c, app):
        hosted = app.state.gateway.agents.get()
        counter = hosted.summarization.counter
        states = {}
        for thread in ("seen", "unseen"):  # twins: same contents, different ids
            await c.post("/threads", json={"thread_id": thread})
            r = await c.post(
                f"/threads/{thread}/runs/wait", json={"assistant_id": "agent", "input": user("q")}
            )
            assert r.status_code == 200, r.text
            snapshot = await hosted.graph.aget_state({"configurable": {"thread_id": thread}})
            states[thread] = snapshot.values["messages"]
        assert [m.type for m in states["seen"]] == ["human", "ai"]
        assert states["seen"][-1].usage_metadata["input_tokens"] > 0

        PROBE.clear()
        loop_thread = threading.get_ident()
        report = (await c.get("/threads/seen/context")).json()
        assert report["tokens"]["anchored"] is True
        # The measurement and the planning ran in a worker thread, not on the event loop.
        assert PROBE and loop_thread not in PROBE

        # What a later compaction decision sees does not depend on whether /context looked at
        # the thread: the usage anchor of "seen" was not registered with its current prefix, so
        # a later history where the messages before it changed is judged like its twin's.
        policy = hosted.summarization.policy
        decisions = {
            name: decide_compaction(
                [HumanMessage("edited", id=f"new-{name}"), msgs[-1]], policy=policy, counter=counter
            )
            for name, msgs in states.items()
        }
        assert decisions["seen"].tokens_before == decisions["unseen"].tokens_before
        assert decisions["seen"].detail == decisions["unseen"].detail
