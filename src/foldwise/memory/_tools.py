"""Tool mode: `memory_search`, `memory_add`, `memory_update`, `memory_delete`.

The namespace always comes from the run (`resolve_namespace`: ``configurable.user_id`` and the
agent name), never from tool arguments, so a model cannot read or write another user's memory.
Writes pass the same scope gate and quarantine as extraction. Every tool answers JSON and never
raises: errors come back as ``{"error": "..."}`` (DeerFlow's tool contract).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field

from foldwise._steps import Steps, run_async, run_sync
from foldwise.errors import FoldwiseError
from foldwise.memory._facts import Fact
from foldwise.memory._identity import resolve_namespace
from foldwise.memory._manager import MemoryManager
from foldwise.memory._thread import run_source

__all__ = ["MEMORY_TOOL_NAMES", "memory_tools"]

MEMORY_TOOL_NAMES = ("memory_search", "memory_add", "memory_update", "memory_delete")

_Query = Annotated[str, Field(description="What to look for, in the user's words.")]
_Limit = Annotated[int, Field(ge=1, le=20, description="How many facts to return.")]
_Content = Annotated[str, Field(description="One durable fact about the user, in one sentence.")]
_FactId = Annotated[str, Field(description="A fact id from memory_search.")]
_Revision = Annotated[
    int | None, Field(description="The revision memory_search showed; a newer one is refused.")
]


def _fact_json(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "text": fact.text,
        "category": fact.category,
        "status": fact.status,
        "since": fact.valid_from.date().isoformat(),
        "revision": fact.revision,
        **({"reason": fact.reason} if fact.reason else {}),
    }


def _answer(steps: Callable[[], Steps[Any]]) -> Steps[str]:
    try:
        result = yield from steps()
    except FoldwiseError as exc:
        return json.dumps({"error": str(exc)}, ensure_ascii=False)
    return json.dumps(result, ensure_ascii=False)


@dataclass(frozen=True)
class _Steps:
    """The four tools' logic over one manager and agent, each a step generator."""

    manager: MemoryManager
    agent: str

    def search(self, runtime: ToolRuntime, query: str, limit: int = 5) -> Steps[str]:
        def run() -> Steps[Any]:
            ns = resolve_namespace(runtime, self.agent)
            facts = yield from self.manager.search_steps(ns, query, k=limit)
            return {"facts": [_fact_json(f) for f in facts]}

        return _answer(run)

    def add(self, runtime: ToolRuntime, content: str) -> Steps[str]:
        def run() -> Steps[Any]:
            ns = resolve_namespace(runtime, self.agent)
            source = run_source(runtime, via="tool")
            fact = yield from self.manager.add_steps(ns, content, source=source, gate=True)
            if fact.status == "quarantined":
                return {"held_for_review": True, "reason": fact.reason, "id": fact.id}
            return {"stored": _fact_json(fact)}

        return _answer(run)

    def update(
        self,
        runtime: ToolRuntime,
        fact_id: str,
        content: str,
        expected_revision: int | None = None,
    ) -> Steps[str]:
        def run() -> Steps[Any]:
            ns = resolve_namespace(runtime, self.agent)
            fact = yield from self.manager.update_steps(
                ns, fact_id, content, expected_revision=expected_revision, gate=True
            )
            return {"stored": _fact_json(fact)}

        return _answer(run)

    def delete(self, runtime: ToolRuntime, fact_id: str) -> Steps[str]:
        def run() -> Steps[Any]:
            ns = resolve_namespace(runtime, self.agent)
            fact = yield from self.manager.retract_steps(ns, fact_id, reason="deleted_by_agent")
            return {"retracted": _fact_json(fact)}

        return _answer(run)


def memory_tools(manager: MemoryManager, agent: str = "agent") -> list[BaseTool]:
    """The four memory tools over `manager`, for the agent called `agent`.

    Each has a sync and an async form; the async one uses only the manager's async path.
    """
    steps = _Steps(manager, agent)
    search_steps, add_steps, update_steps, delete_steps = (
        steps.search,
        steps.add,
        steps.update,
        steps.delete,
    )

    def memory_search(runtime: ToolRuntime, query: _Query, limit: _Limit = 5) -> str:
        return run_sync(search_steps(runtime, query, limit))

    def memory_add(runtime: ToolRuntime, content: _Content) -> str:
        return run_sync(add_steps(runtime, content))

    def memory_update(
        runtime: ToolRuntime,
        fact_id: _FactId,
        content: _Content,
        expected_revision: _Revision = None,
    ) -> str:
        return run_sync(update_steps(runtime, fact_id, content, expected_revision))

    def memory_delete(runtime: ToolRuntime, fact_id: _FactId) -> str:
        return run_sync(delete_steps(runtime, fact_id))

    async def amemory_search(**args: Any) -> str:
        return await run_async(search_steps(**args))

    async def amemory_add(**args: Any) -> str:
        return await run_async(add_steps(**args))

    async def amemory_update(**args: Any) -> str:
        return await run_async(update_steps(**args))

    async def amemory_delete(**args: Any) -> str:
        return await run_async(delete_steps(**args))

    specs: list[tuple[Callable[..., str], Callable[..., Any], str]] = [
        (
            memory_search,
            amemory_search,
            "Search long-term memory about the user (facts from earlier threads).",
        ),
        (
            memory_add,
            amemory_add,
            "Remember one durable fact about the user for future threads (not task details).",
        ),
        (
            memory_update,
            amemory_update,
            "Replace a remembered fact's text; the old value is kept as history.",
        ),
        (memory_delete, amemory_delete, "Retract a remembered fact that is no longer true."),
    ]
    return [
        StructuredTool.from_function(
            func=func, coroutine=coro, name=func.__name__, description=text
        )
        for func, coro, text in specs
    ]
