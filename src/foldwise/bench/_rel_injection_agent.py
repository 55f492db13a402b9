"""The scripted agent the injection area drives: a model that carries payloads everywhere.

`InjectionScript` is the model's brain. Each user turn starts with a marker naming the path
(`[inj user b3 t1]`); on that turn the model calls the path's tool once per payload (every
path's tool for `all`), in one parallel batch: `fetch` (a small tool output), `fetch_big` (an
output the offload middleware stores, leaving a preview), `task` (a delegation whose structured
result brief is the payload) or `read_file` of a `SKILL.md` whose description is the payload.
The summarizer, asked to summarize, echoes every payload of the batch raw (the worst case). The
tools read the payloads from the same script, so the request text never has to carry them.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool

import foldwise
from foldwise.bench._rel_injection_corpus import Payload
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.messages import is_real_user_message
from foldwise.replay._scripted import ScriptedChatModel

__all__ = ["SYSTEM_PROMPT", "TOOL_PATHS", "InjectionScript", "injection_factory"]

SYSTEM_PROMPT = "You are the foldwise injection-campaign agent. Answer briefly."

TOOL_PATHS = {"tool": "fetch", "offload": "fetch_big", "delegation": "task", "skill": "read_file"}
"""Path name -> the tool its turns call once per payload."""

_MARKER = re.compile(r"\[inj (\w+) b(\d+) t(\d+)\]")
_PADDING = " ".join(["padding"] * 560)  # ~4.5 KB: over the campaign's 1,000-token limit
# Every answer is long, so what a compaction removes is always larger than the echoed summary.
_FILLER = " ".join(["filler"] * 500)


@dataclass
class InjectionScript:
    """The payloads of the turn being run, and how each request is answered.

    Attributes:
        turn: Payloads of the current turn, by marker (`user b3 t1` -> payloads).
        batch: Every payload of the current batch (what the summarizer echoes).
        summaries: How many summaries the model wrote.
    """

    turn: dict[str, list[Payload]] = field(default_factory=dict)
    batch: list[Payload] = field(default_factory=list)
    summaries: int = 0

    def payload(self, pid: str) -> Payload:
        """The payload with id `pid` in the current batch."""
        return next(p for p in self.batch if p.id == pid)

    def respond(self, messages: list[BaseMessage]) -> AIMessage:
        """Answer one request (summarizer, condenser or agent)."""
        first = str(messages[0].content) if messages else ""
        if "<summary_to_condense>" in first:
            body = first.split("<summary_to_condense>", 1)[1].split("</summary_to_condense>")[0]
            text = html.unescape(body).strip()
            return AIMessage(text[: len(text) // 2] or "## Goal\ncondensed")
        if "<new_messages>" in first:
            self.summaries += 1
            echoed = "\n".join(f"- {p.text}" for p in self.batch)
            return AIMessage(f"## Session intent\nrun the injection campaign\n## Notes\n{echoed}")
        if messages and isinstance(messages[-1], ToolMessage):
            return AIMessage(f"noted. {_FILLER}")
        human = next((m for m in reversed(messages) if is_real_user_message(m)), None)
        found = _MARKER.search(str(human.content)) if isinstance(human, HumanMessage) else None
        if found is None or found.group(1) not in (*TOOL_PATHS, "all"):
            return AIMessage(f"ok. {_FILLER}")
        path, key = found.group(1), f"{found.group(1)} b{found.group(2)} t{found.group(3)}"
        paths = list(TOOL_PATHS) if path == "all" else [path]
        calls = [
            _call(each, p, f"{each}-{p.id}-{i}")
            for i, p in enumerate(self.turn.get(key, []))
            for each in paths
        ]
        return AIMessage("", tool_calls=calls)


def _call(path: str, payload: Payload, call_id: str) -> dict[str, Any]:
    name = TOOL_PATHS[path]
    if path == "delegation":
        args = {"description": payload.text, "subagent_type": "researcher"}
    elif path == "skill":
        args = {"path": f"/mnt/skills/{payload.id}/SKILL.md"}
    else:
        args = {"ref": payload.id}
    return {"name": name, "args": args, "id": f"call-{call_id}", "type": "tool_call"}


def _tools(script: InjectionScript) -> list[BaseTool]:
    @tool
    def fetch(ref: str) -> str:
        """Fetch a record."""
        return f"record {ref}: {script.payload(ref).text}"

    @tool
    def fetch_big(ref: str) -> str:
        """Fetch a large document."""
        return f"document {ref}: {script.payload(ref).text}\n{_PADDING}"

    @tool
    def task(
        description: str, subagent_type: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> ToolMessage:
        """Delegate work to a sub-agent."""
        return ToolMessage(
            f"sub-agent {subagent_type} finished",
            tool_call_id=tool_call_id,
            name="task",
            additional_kwargs={
                "subagent_status": "completed",
                "subagent_result_brief": description,
            },
        )

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        pid = path.split("/")[-2]
        description = json.dumps(script.payload(pid).text, ensure_ascii=False)
        return f"---\nname: {pid}\ndescription: {description}\n---\nFollow the steps.\n"

    return [fetch, fetch_big, task, read_file]


def injection_factory(
    script: InjectionScript,
) -> tuple[Callable[[AgentRequest], HostedAgent], ScriptedChatModel]:
    """An agent factory for the gateway, and the recording model every agent shares."""
    model = ScriptedChatModel(default=script.respond)
    tools: Sequence[BaseTool] = _tools(script)

    def factory(request: AgentRequest) -> HostedAgent:
        graph = foldwise.create_agent(
            request.config,
            model=model,
            tools=list(tools),
            checkpointer=request.checkpointer,
            system_prompt=SYSTEM_PROMPT,
            memory_worker=False,  # the gateway runs its own
        )
        return HostedAgent(graph, system_prompt=SYSTEM_PROMPT)

    return factory, model
