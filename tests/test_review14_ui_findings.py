"""Review 14: repros of findings on the web page's gateway routes (issue 14).

Each test states one finding; the ones still failing are `xfail(strict=True)` so the lead can
cherry-pick them and flip them when fixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foldwise import create_agent
from foldwise.bench._serve import open_app
from foldwise.durable import is_durable_data_message
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.testing import ScriptedChatModel
from tests.support.gateway import gateway_config, scripted_factory, user
from tests.test_gateway_ui_api import SETTINGS, _build_thread, _model

QUIET: dict[str, Any] = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}
KEYS = [{"key": "key-alice", "user": "alice"}]
ALICE = {"x-api-key": "key-alice"}


async def _run(c: Any, thread: str, text: str, headers: Any = None) -> None:
    r = await c.post(
        f"/threads/{thread}/runs/wait",
        json={"assistant_id": "agent", "input": user(text)},
        headers=headers,
    )
    assert r.status_code == 200, r.text


async def test_context_durable_texts_include_the_recalled_memory_the_model_received(
    tmp_path: Path,
) -> None:
    """The model's request carries a `memory_recall` data message (from the checkpoint's
    `memory_context.recall`); `/context` shows exactly that message's text as `durable.recall`."""
    model = ScriptedChatModel(default="ok")
    config = gateway_config(
        tmp_path,
        {
            **QUIET,
            "gateway": {"auth": {"api_keys": KEYS}},
            "memory": {
                "enabled": True,
                "debounce_seconds": 0,
                "injection": {"max_tokens": 80, "profile_share": 0.5},
            },
        },
    )

    def factory(request: AgentRequest) -> HostedAgent:
        graph = create_agent(
            request.config, model=model, checkpointer=request.checkpointer, memory_worker=False
        )
        return HostedAgent(graph)

    async with open_app(config, factory) as (c, _):
        facts = (
            "My name is Alice",
            "I work at Acme",
            "My favourite colour is teal",
            "I have two cats",
            "I like jazz",
            "I speak German",
            "I live in Munich",
            "My dog is called Rex",
        )
        for text in facts:
            made = await c.post("/memory/facts", json={"text": text}, headers=ALICE)
            assert made.status_code == 201, made.text
        await c.post("/threads", json={"thread_id": "m"}, headers=ALICE)
        await _run(c, "m", "Where do I live? Munich?", ALICE)
        sent = model.requests[-1].messages
        recalled = [
            str(m.content)
            for m in sent
            if is_durable_data_message(m) and "memory_recall" in str(m.content)
        ]
        assert recalled, "precondition: the model received a recall block"
        state = (await c.get("/threads/m/state", headers=ALICE)).json()["values"]
        assert state["memory_context"]["recall"], "precondition: the recall is in the state"
        durable = (await c.get("/threads/m/context", headers=ALICE)).json()["durable"]
        assert "memory_recall" in durable["sections"]
        assert durable["recall"] in recalled


async def test_in_context_messages_show_the_text_the_model_sees(tmp_path: Path) -> None:
    """`in_context` = the model still sees it verbatim: each in-context transcript message has
    the content of the state's message of the same id (offloaded tool output included)."""
    config = gateway_config(tmp_path, SETTINGS)
    _, factory = _model(config)
    async with open_app(config, factory) as (c, _):
        await _build_thread(c)
        state = (await c.get("/threads/t/state")).json()["values"]
        seen = {m["id"]: m["content"] for m in state["messages"]}
        entries = (await c.get("/threads/t/transcript?limit=1000")).json()["entries"]
        differ = [
            (e["seq"], e["message"]["type"])
            for e in entries
            if e.get("in_context") and seen[e["message_id"]] != e["message"]["content"]
        ]
        assert differ == []


async def test_the_pages_heading_lookup_finds_a_thread_whose_id_others_contain(
    tmp_path: Path,
) -> None:
    """The page keeps its thread's row fresh with `/threads/overview {thread_id: id}`
    (views/thread.js `refreshHeading`): five newer threads whose id contains the id (as a
    `query` would match them) do not hide it."""
    config = gateway_config(tmp_path, QUIET)
    async with open_app(config, scripted_factory(ScriptedChatModel(default="ok"))) as (c, _):
        assert (await c.post("/threads", json={"thread_id": "t1"})).is_success
        for i in range(5):
            assert (await c.post("/threads", json={"thread_id": f"t1{i}"})).is_success
        page = (await c.post("/threads/overview", json={"limit": 1, "thread_id": "t1"})).json()
        assert [t["thread_id"] for t in page["threads"]] == ["t1"]
        assert (await c.post("/threads/overview", json={"thread_id": "t"})).json()["threads"] == []
