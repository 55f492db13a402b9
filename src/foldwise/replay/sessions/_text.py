"""Seeded text builders shared by the example sessions (all content written for foldwise)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["SessionBuilder", "fill", "pick"]


def pick(rng: random.Random, items: Sequence[str]) -> str:
    """One item."""
    return items[rng.randrange(len(items))]


def fill(rng: random.Random, chars: int, make: Callable[[random.Random, int], str]) -> str:
    """Concatenate `make(rng, i)` pieces until the text reaches `chars` characters."""
    parts: list[str] = []
    size = 0
    index = 0
    while size < chars:
        piece = make(rng, index)
        parts.append(piece)
        size += len(piece)
        index += 1
    return "".join(parts)


class SessionBuilder:
    """Appends messages with stable ids and tool-call ids, starting with the system prompt."""

    def __init__(self, prefix: str, system: str) -> None:
        self.prefix = prefix
        self.messages: list[object] = [SystemMessage(system)]
        self._calls = 0

    def ask(self, text: str) -> None:
        """A user message."""
        self.messages.append(HumanMessage(text))

    def say(self, text: str) -> None:
        """An assistant message without tool calls."""
        self.messages.append(AIMessage(text))

    def call_id(self) -> str:
        """A fresh tool-call id."""
        self._calls += 1
        return f"{self.prefix}_call_{self._calls:03d}"

    def tool_round(
        self,
        text: str,
        calls: Sequence[tuple[str, dict[str, object], str]],
    ) -> None:
        """An assistant message calling tools (in parallel when several), then their results."""
        ids = [self.call_id() for _ in calls]
        self.messages.append(
            AIMessage(
                content=text,
                tool_calls=[
                    {"name": name, "args": dict(args), "id": call_id}
                    for (name, args, _), call_id in zip(calls, ids, strict=True)
                ],
            )
        )
        for (name, _, result), call_id in zip(calls, ids, strict=True):
            self.messages.append(ToolMessage(content=result, tool_call_id=call_id, name=name))
