"""Tools that return the trace's recorded results by `tool_call_id`."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import ConfigDict

__all__ = ["MISSING_RESULT", "RecordedTool", "ResultBook", "recorded_tools"]

logger = logging.getLogger(__name__)

MISSING_RESULT = "[no result for this call was recorded in the trace]"
"""Content of a made-up result for a tool call the trace never answered."""


class ResultBook:
    """The recorded tool results of one replay run, by `tool_call_id`.

    Each result is handed out as a fresh copy whose message id carries the run's tag, so runs
    never share message objects or ids.
    """

    def __init__(self, results: Mapping[str, ToolMessage], *, tag: str) -> None:
        self._results = dict(results)
        self._tag = tag
        self.missing: list[str] = []

    def result(self, call_id: str, name: str) -> ToolMessage:
        """The recorded result of `call_id`, or a made-up one that says it is missing."""
        recorded = self._results.get(call_id)
        if recorded is None:
            logger.warning("replay: tool call %s (%s) has no recorded result", call_id, name)
            self.missing.append(call_id)
            return ToolMessage(
                content=MISSING_RESULT,
                tool_call_id=call_id,
                name=name,
                id=f"missing-{call_id}@{self._tag}",
            )
        copy = recorded.model_copy(deep=True)
        copy.id = f"{recorded.id}@{self._tag}"
        if not copy.name:
            copy.name = name
        return copy


class RecordedTool(BaseTool):
    """A tool whose every call returns the recorded `ToolMessage` for its `tool_call_id`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    book: Any = None

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError("RecordedTool answers through invoke() with a tool call")

    def _answer(self, input: Any) -> ToolMessage:
        call_id = str(input.get("id") or "") if isinstance(input, dict) else ""
        if not isinstance(self.book, ResultBook):
            raise RuntimeError("RecordedTool has no ResultBook")
        return self.book.result(call_id, self.name)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Return the recorded result of the tool call `input`."""
        return self._answer(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async twin of `invoke`."""
        return self._answer(input)


def _inferred_schema(calls: Iterable[dict[str, Any]]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for call in calls:
        for key, value in (call.get("args") or {}).items():
            if key in properties:
                continue
            if isinstance(value, bool):
                kind = "boolean"
            elif isinstance(value, int | float):
                kind = "number"
            elif isinstance(value, list):
                kind = "array"
            elif isinstance(value, dict):
                kind = "object"
            else:
                kind = "string"
            properties[key] = {"type": kind}
    return {"type": "object", "properties": properties}


def recorded_tools(
    messages: Sequence[BaseMessage], schemas: Sequence[dict[str, Any]], book: ResultBook
) -> list[RecordedTool]:
    """One `RecordedTool` per tool name the trace's assistant called.

    Schemas come from the trace's tool definitions when it has them, else they are inferred
    from the recorded arguments (names and JSON types only).
    """
    defined = {
        s["function"]["name"]: s["function"] for s in schemas if isinstance(s.get("function"), dict)
    }
    calls: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls.setdefault(call["name"], []).append(dict(call))
    names = list(defined) + [name for name in calls if name not in defined]
    tools: list[RecordedTool] = []
    for name in names:
        spec = defined.get(name)
        schema = spec.get("parameters") if spec else None
        description = str(spec.get("description") or "") if spec else ""
        tools.append(
            RecordedTool(
                name=name,
                description=description or f"Recorded tool {name} (replayed from a trace).",
                args_schema=schema or _inferred_schema(calls.get(name, [])),
                book=book,
            )
        )
    return tools
