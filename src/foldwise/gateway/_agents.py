"""The agents a gateway serves: `assistant_id` → compiled foldwise agent, per run model.

`agent` is the default assistant, built with `foldwise.create_agent` from `models[0]`, the
config's `tools:` and foldwise's middleware. Every configured model name is an assistant too
(the same agent on that model), and a request may pick another configured model with
`model_name`. Agents are built once per (assistant, model) and share the gateway's
checkpointer. Applications plug in their own agents with an `AgentFactory`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from foldwise.agent import create_agent, find_memory, find_summarization
from foldwise.config import FoldwiseConfig
from foldwise.gateway._errors import AssistantNotFoundError, RequestFieldError
from foldwise.memory import MemoryWorker
from foldwise.middleware import SummarizationMiddleware
from foldwise.offload import ArtifactStore, artifact_store_from_config

__all__ = [
    "DEFAULT_ASSISTANT",
    "AgentFactory",
    "AgentRegistry",
    "AgentRequest",
    "HostedAgent",
    "assistant_uuid",
    "default_agent_factory",
]

DEFAULT_ASSISTANT = "agent"
"""The assistant id of the default agent (built from `models[0]`)."""

_ASSISTANT_NAMESPACE = uuid.UUID("6f1d2c3a-8b7e-5f40-9a1b-0c2d3e4f5a6b")


def assistant_uuid(name: str) -> str:
    """The stable UUID of an assistant (uuid5 of its name): the same on every worker and restart.

    LangGraph Server identifies assistants by UUID; clients that store one keep working.
    """
    return str(uuid.uuid5(_ASSISTANT_NAMESPACE, name))


@dataclass(frozen=True)
class AgentRequest:
    """What an `AgentFactory` is asked to build.

    Attributes:
        config: The gateway's configuration.
        assistant_id: `agent` or a configured model name.
        model_name: The run model (a configured name), or `None` for the default.
        checkpointer: The gateway's checkpointer; the agent must use it.
    """

    config: FoldwiseConfig
    assistant_id: str
    model_name: str | None
    checkpointer: BaseCheckpointSaver[Any]


@dataclass(frozen=True)
class HostedAgent:
    """A compiled agent plus what the gateway cannot read back from the graph.

    An `AgentFactory` may return a bare compiled graph; the gateway then finds the tools in the
    graph's tool node and assumes no system prompt.

    Attributes:
        graph: The compiled LangGraph agent (from `foldwise.create_agent`).
        system_prompt: The agent's system prompt, counted by `GET /threads/{id}/context`.
        tools: The tools bound to the model (default: those of the graph's tool node).
        artifact_store: Where its offloaded artifacts live (default: `offload.root`), so
            `DELETE /threads/{id}` removes them.
    """

    graph: Any
    system_prompt: str | None = None
    tools: tuple[BaseTool, ...] | None = None
    artifact_store: ArtifactStore | None = None

    @property
    def summarization(self) -> SummarizationMiddleware | None:
        """The agent's `SummarizationMiddleware`, if it was built by `create_agent`."""
        return find_summarization(self.graph)

    def bound_tools(self) -> list[BaseTool]:
        """The tools the model sees."""
        if self.tools is not None:
            return list(self.tools)
        node = getattr(self.graph, "nodes", {}).get("tools")
        by_name = getattr(getattr(node, "bound", None), "tools_by_name", None)
        return list(by_name.values()) if isinstance(by_name, dict) else []


AgentFactory = Callable[[AgentRequest], Any]
"""Builds the agent for a request: returns a compiled graph or a `HostedAgent`."""


def default_agent_factory(request: AgentRequest) -> HostedAgent:
    """`foldwise.create_agent` with the configured model, tools and the gateway checkpointer."""
    graph = create_agent(
        request.config,
        model=request.model_name,
        checkpointer=request.checkpointer,
        memory_worker=False,  # the gateway runs one memory worker per process
        runs_carry_ids=True,  # every run's config carries its run id
    )
    return HostedAgent(graph)


class AgentRegistry:
    """Resolves assistant ids and model names, and builds each agent once.

    Args:
        config: The gateway configuration.
        checkpointer: Shared by every agent.
        factory: Builds agents (default: `default_agent_factory`).
        memory_worker: This process's memory worker: the agents built here wake it when they
            queue a span for memory, instead of leaving it to the worker's next poll.
    """

    def __init__(
        self,
        config: FoldwiseConfig,
        checkpointer: BaseCheckpointSaver[Any],
        factory: AgentFactory | None = None,
        *,
        memory_worker: MemoryWorker | None = None,
    ) -> None:
        self.config = config
        self.checkpointer = checkpointer
        self.factory = factory or default_agent_factory
        self._agents: dict[str | None, HostedAgent] = {}
        self._lock = threading.Lock()
        self.default_artifacts: ArtifactStore = artifact_store_from_config(config)
        self.loaded_at = datetime.now(UTC)
        self.memory_worker = memory_worker
        """When this worker loaded the configuration: the assistants' `created_at`."""

    @property
    def assistant_ids(self) -> list[str]:
        """Every assistant id served: `agent`, then each configured model name."""
        return [DEFAULT_ASSISTANT, *(n for n in self.config.model_names if n != DEFAULT_ASSISTANT)]

    def canonical(self, assistant_id: str) -> str:
        """The assistant name for a name or its stable UUID (`assistant_uuid`).

        Raises:
            AssistantNotFoundError: Neither a served name nor the UUID of one (404).
        """
        names = self.assistant_ids
        if assistant_id in names:
            return assistant_id
        for name in names:
            if assistant_uuid(name) == assistant_id:
                return name
        raise AssistantNotFoundError(assistant_id, names)

    def remembered(self, value: Any) -> str:
        """The assistant a thread's metadata names (a name or a UUID), else `agent`."""
        try:
            return self.canonical(value) if isinstance(value, str) else DEFAULT_ASSISTANT
        except AssistantNotFoundError:
            return DEFAULT_ASSISTANT

    def resolve(
        self, assistant_id: str, model_name: str | None, *, field: str = "model_name"
    ) -> str | None:
        """Check the assistant and the model; return the run model (`None`: the default).

        Every assistant is the same agent on a different run model: `agent` runs `models[0]`
        (or `model_name`), a model-name assistant runs that model unless `model_name` says
        otherwise.

        Raises:
            AssistantNotFoundError: An unknown assistant id (404).
            RequestFieldError: `model_name` names no configured model (422).
        """
        assistant_id = self.canonical(assistant_id)
        names = self.config.model_names
        if model_name is not None and model_name not in names:
            known = ", ".join(names) or "none configured"
            raise RequestFieldError(field, f"{model_name!r} names no configured model ({known})")
        if model_name is None and assistant_id != DEFAULT_ASSISTANT:
            model_name = assistant_id
        if model_name is not None and names and model_name == names[0]:
            model_name = None  # the default model: share the default agent
        return model_name

    def get(
        self, assistant_id: str = DEFAULT_ASSISTANT, model_name: str | None = None
    ) -> HostedAgent:
        """The agent for an assistant and run model (built on first use).

        Raises:
            AssistantNotFoundError: An unknown assistant id.
            RequestFieldError: An unknown model name.
            ModelConstructionError, ConfigError: The agent could not be built.
        """
        key = self.resolve(assistant_id, model_name)
        with self._lock:
            hosted = self._agents.get(key)
        if hosted is not None:
            return hosted
        built = self.factory(
            AgentRequest(
                config=self.config,
                assistant_id=DEFAULT_ASSISTANT if key is None else key,
                model_name=key,
                checkpointer=self.checkpointer,
            )
        )
        hosted = built if isinstance(built, HostedAgent) else HostedAgent(built)
        self._wake_on_enqueue(hosted)
        with self._lock:
            return self._agents.setdefault(key, hosted)

    def _wake_on_enqueue(self, hosted: HostedAgent) -> None:
        """Let the agent's memory queue wake this process's worker instead of its next poll."""
        middleware = find_memory(hosted.graph)
        pipeline = middleware.pipeline if middleware is not None else None
        if self.memory_worker is not None and pipeline is not None and pipeline.worker is None:
            pipeline.worker = self.memory_worker

    async def aclose(self) -> None:
        """Cancel the built agents' background summaries and wait for them (on shutdown)."""
        with self._lock:
            hosted = list(self._agents.values())
        for agent in hosted:
            summarization = agent.summarization
            if summarization is not None:
                await summarization.aclose()

    def forget_thread(self, thread_id: str) -> None:
        """Cancel and drop the thread's background summaries in every built agent (deleted)."""
        with self._lock:
            hosted = list(self._agents.values())
        for agent in hosted:
            summarization = agent.summarization
            presummaries = summarization.compactor.presummaries if summarization else None
            if presummaries is not None:
                presummaries.discard(thread_id)

    def artifact_stores(self) -> Sequence[ArtifactStore]:
        """Every distinct artifact store used by the built agents (and the configured one)."""
        stores: list[ArtifactStore] = [self.default_artifacts]
        with self._lock:
            for hosted in self._agents.values():
                store = hosted.artifact_store
                if store is not None and all(store is not s for s in stores):
                    stores.append(store)
        return stores
