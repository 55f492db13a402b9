"""Small message builders shared by the compaction tests."""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

_ids = itertools.count()


def nid(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


def human(text: str, **kwargs: Any) -> HumanMessage:
    return HumanMessage(content=text, id=kwargs.pop("id", None) or nid("h"), **kwargs)


def ai(text: str = "", *calls: tuple[str, str, dict[str, Any]], **kwargs: Any) -> AIMessage:
    tool_calls = [
        {"name": name, "args": args, "id": cid, "type": "tool_call"} for cid, name, args in calls
    ]
    return AIMessage(
        content=text, tool_calls=tool_calls, id=kwargs.pop("id", None) or nid("a"), **kwargs
    )


def tool(call_id: str, text: str, name: str = "search", **kwargs: Any) -> ToolMessage:
    return ToolMessage(
        content=text,
        tool_call_id=call_id,
        name=name,
        id=kwargs.pop("id", None) or nid("t"),
        **kwargs,
    )


def reminder(text: str) -> SystemMessage:
    return SystemMessage(
        content=text, id=nid("r"), additional_kwargs={"dynamic_context_reminder": True}
    )


class LenCounter:
    """A deterministic counter: one token per character (plus nothing), like DeerFlow's `len`."""

    name = "len"

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: Any) -> int:
        return len(str(message.content)) + sum(
            len(str(c)) for c in getattr(message, "tool_calls", [])
        )

    def count_messages(self, messages: Any, *, anchor: bool = True) -> int:
        return sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Any) -> int:
        return 0

    def count_request(self, messages: Any, *, static_tokens: int = 0) -> Any:
        from foldwise.tokens import RequestCount

        total = self.count_messages(messages) + static_tokens
        return RequestCount(
            total=total, messages=total - static_tokens, static=static_tokens, anchored=False
        )


def tool_turns(turns: int) -> list[BaseMessage]:
    """A system prompt, then `turns` of question, tool call and tool result (fixed ids)."""
    messages: list[BaseMessage] = [SystemMessage("You are terse.", id="sys")]
    for i in range(turns):
        messages.append(HumanMessage(f"question {i} " * 20, id=f"h{i}"))
        messages.append(
            AIMessage(
                "",
                id=f"a{i}",
                tool_calls=[{"name": "lookup", "args": {"q": f"q{i}"}, "id": f"c{i}"}],
            )
        )
        messages.append(ToolMessage(f"result {i} " * 50, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages
