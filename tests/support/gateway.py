"""Helpers for the gateway tests: configs, scripted agent factories, SSE parsing, PostgreSQL.

The app itself runs in-process with `foldwise.bench._serve.open_app`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from psycopg import sql

import foldwise
from foldwise.config import FoldwiseConfig, parse_config
from foldwise.gateway import AgentRequest, HostedAgent

__all__ = [
    "Gate",
    "drop_schema",
    "gateway_config",
    "is_summarizer_call",
    "parse_sse",
    "postgres_url",
    "scripted_factory",
    "user",
]


def gateway_config(tmp_path: Path, data: dict[str, Any] | None = None) -> FoldwiseConfig:
    """A config whose storage and artifacts live under `tmp_path` (SQLite unless overridden)."""
    base: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'gateway.db'}"},
        "offload": {"root": str(tmp_path / "artifacts")},
    }
    for key, value in (data or {}).items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return parse_config(base)


def scripted_factory(
    model: Any,
    *,
    tools: Sequence[BaseTool] = (),
    system_prompt: str | None = None,
) -> Callable[[AgentRequest], HostedAgent]:
    """An `AgentFactory` building foldwise agents around one scripted model instance."""

    def factory(request: AgentRequest) -> HostedAgent:
        graph = foldwise.create_agent(
            request.config,
            model=model,
            tools=list(tools),
            checkpointer=request.checkpointer,
            system_prompt=system_prompt,
            memory_worker=False,  # the gateway runs one per process, as its default factory
            runs_carry_ids=True,  # as the default factory: every gateway run has its id
        )
        return HostedAgent(graph, system_prompt=system_prompt)

    return factory


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """Split a Server-Sent Events body into `(event, data)` pairs (comments skipped)."""
    events: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if event or data:
            events.append((event, json.loads("\n".join(data)) if data else None))
    return events


def is_summarizer_call(messages: Sequence[BaseMessage]) -> bool:
    """Whether a recorded model request is a summarizer call (its prompt has the data tags)."""
    return bool(messages) and "<new_messages>" in str(messages[0].content)


def user(text: str, **extra: Any) -> dict[str, Any]:
    """A run input with one OpenAI-style user message."""
    return {"messages": [{"role": "user", "content": text, **extra}]}


class Gate:
    """Makes a scripted model (or tool) block until the test releases it.

    `respond(answer)` returns a `ScriptedChatModel` response that signals `entered`, waits for
    `release()` (at most 20 s, so a failing test cannot hang the suite) and answers `answer`.
    """

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def block(self) -> None:
        """Signal arrival and wait for the release (call from a worker thread)."""
        self.entered.set()
        self.released.wait(20)

    def respond(self, answer: Any) -> Callable[[list[BaseMessage]], Any]:
        def respond(messages: list[BaseMessage]) -> Any:
            self.block()
            return answer(messages) if callable(answer) else answer

        return respond

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 20), "the model was never called"

    def release(self) -> None:
        self.released.set()


PG_BASES = ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://root@127.0.0.1:5432/test")


@functools.cache
def _probe_postgres() -> tuple[str | None, str]:
    errors = []
    for dsn in PG_BASES:
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return dsn, ""
        except psycopg.Error as exc:
            errors.append(str(exc).strip())
    return None, "PostgreSQL on 127.0.0.1:5432 (database test) unreachable: " + "; ".join(errors)


def postgres_url() -> tuple[str, str, str]:
    """`(storage url with a fresh ?schema=, dsn, schema)`; skips (or fails under CI) if down."""
    dsn, reason = _probe_postgres()
    if dsn is None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so Postgres tests must run)")
        pytest.skip(reason)
    schema = f"foldwise_gw_{uuid.uuid4().hex[:12]}"
    return f"{dsn}?schema={schema}", dsn, schema


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema with everything in it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
