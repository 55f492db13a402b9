"""The scripted agent and the owner's data of the isolation area.

`IsolationScript` answers `[iso seed]` turns by calling `fetch_big` (its output, which carries
the owner's secret, is offloaded to an artifact) and `[iso probe] {json}` turns by calling the
tools the JSON lists (`read_offloaded` / `search_offloaded` on another thread's artifact, the
memory tools on another identity's fact), so a foreign identity's run tries every data-reading
tool with the owner's ids. The summarizer echoes the head of what it summarizes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

import foldwise
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.messages import is_real_user_message
from foldwise.replay._scripted import ScriptedChatModel

__all__ = ["SECRET", "IsolationScript", "isolation_factory"]

SECRET = "ALICE-SECRET-7f3a9c"
"""Text only the owner's data carries: it must never appear in another identity's answers."""

_PADDING = " ".join(f"row{i}" for i in range(2000))


@dataclass
class IsolationScript:
    """How the isolation agent answers.

    Attributes:
        tool_results: Every tool result the model received, by tool name (what a probe read).
    """

    tool_results: list[tuple[str, str]] = field(default_factory=list)

    def respond(self, messages: list[BaseMessage]) -> AIMessage:
        """Answer one request (summarizer or agent)."""
        first = str(messages[0].content) if messages else ""
        if "<new_messages>" in first or "<summary_to_condense>" in first:
            # Echo what is summarized: another identity's summary could only carry the
            # owner's secret if the owner's messages reached its prompt.
            body = first.split("<new_messages>")[-1].split("</new_messages>")[0]
            return AIMessage("## Goal\n" + " ".join(html.unescape(body).split())[:300])
        if messages and isinstance(messages[-1], ToolMessage):
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                self.tool_results.append((str(message.name), message.text))
            return AIMessage("done")
        human = next((m for m in reversed(messages) if is_real_user_message(m)), None)
        text = str(human.content) if isinstance(human, HumanMessage) else ""
        if text.startswith("[iso seed]"):
            call = {"name": "fetch_big", "args": {"ref": "r"}, "id": "seed-1", "type": "tool_call"}
            return AIMessage("", tool_calls=[call])
        if text.startswith("[iso probe]"):
            calls: list[dict[str, Any]] = json.loads(text.removeprefix("[iso probe]"))
            return AIMessage(
                "",
                tool_calls=[
                    {"name": c["name"], "args": c["args"], "id": f"probe-{i}", "type": "tool_call"}
                    for i, c in enumerate(calls)
                ],
            )
        return AIMessage("ok")


def _fetch_big() -> BaseTool:
    @tool
    def fetch_big(ref: str) -> str:
        """Fetch a large document."""
        return f"document {ref}: {SECRET}\n{_PADDING}\n{SECRET}"

    return fetch_big


def isolation_factory(
    script: IsolationScript,
) -> tuple[Callable[[AgentRequest], HostedAgent], ScriptedChatModel]:
    """An agent factory for the gateway and the model its agents share."""
    model = ScriptedChatModel(default=script.respond)

    def factory(request: AgentRequest) -> HostedAgent:
        graph = foldwise.create_agent(
            request.config,
            model=model,
            tools=[_fetch_big()],
            checkpointer=request.checkpointer,
            memory_worker=False,
        )
        return HostedAgent(graph)

    return factory, model
