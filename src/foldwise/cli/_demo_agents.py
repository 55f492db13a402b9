"""The demo gateway's configuration and agents: one replay assistant per shipped session.

`demo_config(root)` is foldwise's defaults on a temporary directory with a 32k-token window
(compaction at 75 % of it, the extractive summarizer, memory on the same SQLite file, pasted
input over 8,000 tokens offloaded). `DemoAgents` is the gateway's `AgentFactory`: the assistant
named after a session (`proposal_review`, ...) is `foldwise.create_agent` around a
`ReplayChatModel` that plays the session's recorded answers and the session's recorded tools;
every other assistant (`agent`) is the scripted streaming `DemoChatModel` with `search_docs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage

from foldwise.agent import create_agent
from foldwise.cli._demo_model import DEMO_SYSTEM_PROMPT, DemoChatModel, search_docs
from foldwise.config import FoldwiseConfig
from foldwise.gateway import AgentRequest, HostedAgent
from foldwise.messages import message_text
from foldwise.replay import ReplayChatModel, default_provider_counter
from foldwise.replay._driver import split_turns
from foldwise.replay._tools import RecordedTool, ResultBook, recorded_tools
from foldwise.replay.sessions import SESSION_NAMES, SESSION_TITLES, session_trace

__all__ = [
    "DEMO_CHAT_MODEL",
    "DEMO_HUMAN_TOKEN_LIMIT",
    "DEMO_TRIGGER_FRACTION",
    "DEMO_WINDOW",
    "DemoAgents",
    "ReplayedSession",
    "demo_config",
    "playable",
]

_M = TypeVar("_M", bound=BaseMessage)

DEMO_WINDOW = 32_000
"""Context window of every demo model: a common local-model size, small enough that each
shipped session compacts at least once (at 128k the proposal review never does)."""
DEMO_TRIGGER_FRACTION = 0.75
"""Compaction starts at 75 % of the window (24,000 tokens)."""
DEMO_HUMAN_TOKEN_LIMIT = 8_000
"""Pasted input above this many tokens is offloaded (a quarter of the window; the default,
50,000, is for large windows). The proposal review's 6,200-token paste stays in context."""
DEMO_CHAT_MODEL = "demo-chat"
"""The configured name of the scripted model behind the `agent` assistant."""


def demo_config(root: Path) -> FoldwiseConfig:
    """The demo's configuration: everything under `root`, no API key, no network."""
    window = {"context_window": DEMO_WINDOW}
    models = [
        {
            "name": DEMO_CHAT_MODEL,
            "use": "foldwise.cli._demo_model:DemoChatModel",
            "display_name": "Scripted demo model (streams, answers offline)",
            **window,
        },
        *(
            {
                "name": name,
                "use": "foldwise.replay:ReplayChatModel",
                "display_name": f"Replay: {SESSION_TITLES[name]}",
                **window,
            }
            for name in SESSION_NAMES
        ),
    ]
    return FoldwiseConfig.model_validate(
        {
            "models": models,
            "summarization": {
                "model_name": "extractive",
                "trigger": [{"type": "fraction", "value": DEMO_TRIGGER_FRACTION}],
            },
            "offload": {
                "root": str(root / "artifacts"),
                "human_token_limit": DEMO_HUMAN_TOKEN_LIMIT,
            },
            "storage": {"url": f"sqlite:///{root / 'foldwise.db'}"},
            "memory": {"enabled": True, "debounce_seconds": 0},
        }
    )


def _tagged(message: _M, tag: str) -> _M:
    """A copy whose id is unique to the session (the traces reuse `trace-00002`...)."""
    copy = message.model_copy(deep=True)
    copy.id = f"{message.id}@{tag}"
    if isinstance(copy, AIMessage):
        copy.usage_metadata = None
    return copy


def playable(answers: Sequence[AIMessage]) -> list[AIMessage]:
    """A turn's recorded answers as one run plays them: each ends in tool calls but the last.

    A recorded note without tool calls in the middle of a turn (the assistant thinking aloud,
    then acting) would end a run; its text is folded into the next answer instead.
    """
    out: list[AIMessage] = []
    carried: list[str] = []
    for index, answer in enumerate(answers):
        if not answer.tool_calls and index < len(answers) - 1:
            carried.append(message_text(answer))
            continue
        if carried:
            answer = answer.model_copy(deep=True)
            answer.content = "\n\n".join([*carried, message_text(answer)])
            carried = []
        out.append(answer)
    return out


@dataclass
class ReplayedSession:
    """One shipped session, ready to be played turn by turn through the gateway.

    Attributes:
        name: The session (`SESSION_NAMES`), also its assistant id.
        title: Its human title (thread metadata `title`).
        system_prompt: The recorded system prompt.
        inputs: Per turn, the human messages that open it.
        answers: Per turn, the recorded answers the model plays.
        tools: The recorded tools (results by `tool_call_id`).
        model: The replay model; `load_turn` before each run.
    """

    name: str
    title: str
    system_prompt: str | None
    inputs: list[list[BaseMessage]]
    answers: list[list[AIMessage]]
    tools: list[RecordedTool]
    model: ReplayChatModel = field(repr=False)

    @classmethod
    def load(cls, name: str) -> ReplayedSession:
        """Session `name`, its ids made unique, its turns split and made playable."""
        trace = session_trace(name)
        turns, results, _ = split_turns(trace)
        book = ResultBook(results, tag=name)
        model = ReplayChatModel(
            window=DEMO_WINDOW,
            provider_counter=default_provider_counter(),
            profile={"max_input_tokens": DEMO_WINDOW},
            model_name=f"replay:{name}",
        )
        return cls(
            name=name,
            title=SESSION_TITLES[name],
            system_prompt=trace.system_prompt,
            inputs=[[_tagged(m, name) for m in turn.inputs] for turn in turns],
            answers=[playable(turn.answers) for turn in turns],
            tools=recorded_tools(trace.messages, trace.tools, book),
            model=model,
        )

    def load_turn(self, index: int) -> None:
        """Queue the recorded answers of turn `index` (ids tagged like the inputs)."""
        self.model.load_turn([_tagged(a, self.name) for a in self.answers[index]])


class DemoAgents:
    """The demo gateway's `AgentFactory`: replay assistants per session, else the demo model.

    Args:
        sessions: The sessions to serve (default: every shipped one).
    """

    def __init__(self, sessions: Sequence[str] = SESSION_NAMES) -> None:
        self.sessions = {name: ReplayedSession.load(name) for name in sessions}

    def __call__(self, request: AgentRequest) -> HostedAgent:
        """Build the agent of `request.assistant_id` on the gateway's checkpointer."""
        session = self.sessions.get(request.assistant_id)
        model: Any
        tools: list[Any]
        if session is not None:
            model, tools, prompt = session.model, list(session.tools), session.system_prompt
        else:
            model = DemoChatModel(profile={"max_input_tokens": DEMO_WINDOW})
            tools, prompt = [search_docs], DEMO_SYSTEM_PROMPT
        graph = create_agent(
            request.config,
            model=model,
            tools=tools,
            checkpointer=request.checkpointer,
            system_prompt=prompt,
            name=request.assistant_id,
            memory_worker=False,  # the gateway runs the memory worker
            runs_carry_ids=True,  # every gateway run's config carries its run id
        )
        return HostedAgent(graph, system_prompt=prompt)
