from __future__ import annotations
from pathlib import Path
import pytest
from foldwise.testing import ScriptedChatModel
from foldwise.durable import DATA_OPEN
from tests.support.gateway import gateway_config, open_gateway, scripted_factory, user

KEYS = {"auth": {"api_keys": [{"key": "key-alice", "user": "alice"}, {"key": "key-bob", "user": "bob"}]}}
QUIET = {"summarization": {"trigger": {"type": "messages", "value": 1000}}}

async def test_gateway_memory_is_per_authenticated_user(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, {**QUIET, "gateway": KEYS, "memory": {"enabled": True}})
    model = ScriptedChatModel(default="ok")
    async with open_gateway(config, scripted_factory(model)) as (c, _):
        for who, key, tid, text in (("alice", "key-alice", "a1", "I live in Berlin."), ("bob", "key-bob", "b1", "Where should I eat?")):
            h = {"x-api-key": key}
            r = await c.post("/threads", json={"thread_id": tid}, headers=h)
            assert r.status_code == 200, r.text
            r = await c.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "agent", "input": user(text), "config": {"configurable": {"user_id": "mallory"}}}, headers=h)
            assert r.status_code == 200, r.text
        block = "\n".join(str(m.content) for m in model.requests[-1].messages if DATA_OPEN in str(m.content))
        print(block)
        assert "Berlin" not in block
