"""Assemble foldwise agents: the middleware stack in its required order, and `create_agent`."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent as _lc_create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from foldwise.config import FoldwiseConfig
from foldwise.durable import DurableChannel
from foldwise.errors import ConfigError
from foldwise.memory import (
    LocalMemoryOutbox,
    MemoryManager,
    MemoryOutbox,
    MemoryWorker,
    open_outbox,
)
from foldwise.memory._pipeline import MemoryPipeline, graph_commit_check
from foldwise.middleware._fused import fuse, has_hook
from foldwise.middleware.durable_context import DurableContextMiddleware
from foldwise.middleware.memory import MemoryMiddleware
from foldwise.middleware.summarization import SummarizationMiddleware
from foldwise.middleware.tool_output_offload import ToolOutputOffloadMiddleware
from foldwise.models import ModelRegistry, import_object
from foldwise.offload import ArtifactStore
from foldwise.state import FoldwiseState
from foldwise.tokens import get_counter

__all__ = ["build_middlewares", "create_agent", "find_memory", "find_summarization", "load_tools"]

_SUMMARIZERS: weakref.WeakKeyDictionary[Any, SummarizationMiddleware] = weakref.WeakKeyDictionary()
_MEMORIES: weakref.WeakKeyDictionary[Any, MemoryMiddleware] = weakref.WeakKeyDictionary()


def load_tools(config: FoldwiseConfig) -> list[BaseTool]:
    """Import the config's `tools:` entries (each a `BaseTool` or `@tool` function)."""
    tools: list[BaseTool] = []
    for index, entry in enumerate(config.tools):
        obj = import_object(entry.use, what=f"tools[{index}].use")
        if not isinstance(obj, BaseTool):
            raise ConfigError(f"{entry.use} is not a LangChain tool", key=f"tools[{index}].use")
        tools.append(obj)
    return tools


def build_middlewares(
    config: FoldwiseConfig,
    *,
    run_model_name: str | None = None,
    model: BaseChatModel | None = None,
    registry: ModelRegistry | None = None,
    static_tokens: int = 0,
    durable_channels: Sequence[DurableChannel] = (),
    store: BaseStore | ArtifactStore | None = None,
    memory: MemoryManager | None = None,
    memory_outbox: MemoryOutbox | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The foldwise middleware list in its required order.

    Durable capture → summarization → offload (tool wrapper) → memory (when
    ``memory.enabled``; over `memory`, else a manager from the `memory:` block).

    Durable capture runs before summarization, so nothing is compacted before it is recorded;
    the tool-output offload wrapper comes after. Artifacts go to `store` (a LangGraph store,
    shared by every worker) or to the filesystem under `offload.root`.
    """
    offload = (
        ToolOutputOffloadMiddleware.from_config(config, store=store)
        if config.offload.enabled
        else None
    )
    durable = DurableContextMiddleware.from_config(config, channels=durable_channels)
    summarization = SummarizationMiddleware(
        config=config,
        model=model,
        run_model_name=run_model_name,
        registry=registry,
        static_tokens=static_tokens,
        offload=offload,
        durable=durable,
    )
    stack: list[AgentMiddleware[Any, Any, Any]] = [durable, summarization]
    if offload is not None:
        stack.append(offload)
    if config.memory.enabled or memory is not None:
        stack.append(_memory_middleware(config, summarization, memory, memory_outbox))
    return stack


def _memory_middleware(
    config: FoldwiseConfig,
    summarization: SummarizationMiddleware,
    manager: MemoryManager | None,
    outbox: MemoryOutbox | None,
) -> MemoryMiddleware:
    """Memory with its write queue; a compaction flushes its span into the queue too."""
    if outbox is None:
        # A manager handed in keeps its facts where it likes: queue in-process beside it.
        url = config.memory.url or config.storage.url
        outbox = LocalMemoryOutbox() if manager is not None else open_outbox(url)
    pipeline = MemoryPipeline(
        outbox, agent=config.memory.agent, debounce_seconds=config.memory.debounce_seconds
    )
    middleware = MemoryMiddleware.from_config(config, manager=manager, pipeline=pipeline)
    if config.memory.flush_on_compaction:
        flushes = summarization.compactor.flushes
        summarization.compactor.flushes = [*flushes, pipeline.compaction_flush]
    return middleware


def create_agent(
    config: FoldwiseConfig | None = None,
    *,
    model: BaseChatModel | str | None = None,
    tools: Sequence[BaseTool | Any] = (),
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    system_prompt: str | None = None,
    name: str | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    durable_channels: Sequence[DurableChannel] = (),
    memory: MemoryManager | None = None,
    memory_worker: bool = True,
    runs_carry_ids: bool = False,
) -> Any:
    """Build a LangGraph agent with foldwise's state schema and middleware.

    Args:
        config: The configuration (defaults apply when omitted).
        model: The run model: an instance, or a configured name (default: `models[0]`).
        tools: Tools in addition to the config's `tools:`.
        checkpointer: LangGraph checkpointer for persistent threads.
        store: LangGraph store (shared artifacts, memory).
        system_prompt: The agent's system prompt.
        name: The graph's name.
        middleware: Extra middleware, placed after foldwise's.
        durable_channels: Application channels rendered in the durable data block.
        memory: Long-term memory to use (default: from the `memory:` block when enabled).
        memory_worker: Run a thread applying queued memory updates (the gateway runs its own).
        runs_carry_ids: Every invocation's config carries a `run_id` (LangGraph's server and
            foldwise's gateway pass one): run-start work then happens in a run's first
            `before_model` node, one checkpoint fewer per run. A call without one is treated
            as a new run at each model call (correct, slower).

    Returns:
        A compiled LangGraph graph (`langchain.agents.create_agent` under the hood).
    """
    config = config or FoldwiseConfig()
    instance, registry, run_name = _run_model(config, model)
    all_tools = [*load_tools(config), *tools]
    counter = get_counter(config.model(run_name) if run_name else None, config=config)
    static = counter.count_tools(all_tools)
    if system_prompt:
        static += counter.count_text(system_prompt)
    middlewares = build_middlewares(
        config,
        run_model_name=run_name,
        model=instance,
        registry=registry,
        static_tokens=static,
        durable_channels=durable_channels,
        store=store,
        memory=memory,
    )
    summarization = next((m for m in middlewares if isinstance(m, SummarizationMiddleware)), None)
    agent = _lc_create_agent(
        instance,
        tools=all_tools,
        system_prompt=system_prompt,
        middleware=[*_fused(middlewares, summarization, runs_carry_ids, middleware), *middleware],
        state_schema=FoldwiseState,
        checkpointer=checkpointer,
        store=store,
        name=name,
    )
    if summarization is not None:
        _SUMMARIZERS[agent] = summarization
    remembering = next((m for m in middlewares if isinstance(m, MemoryMiddleware)), None)
    if remembering is not None:
        _MEMORIES[agent] = remembering
        if memory_worker:
            _start_memory_worker(agent, remembering)
    return agent


def _run_model(
    config: FoldwiseConfig, model: BaseChatModel | str | None
) -> tuple[BaseChatModel, ModelRegistry | None, str | None]:
    """The run model, the registry it came from and its configured name (none for an instance)."""
    if isinstance(model, BaseChatModel):
        return model, None, None
    registry = ModelRegistry(config)
    run_name = model or registry.default_name
    if run_name is None:
        raise ConfigError("no model given and no models configured", key="models")
    if not registry.knows(run_name):
        raise ConfigError(f"{run_name!r} names no configured model", key="model")
    return registry.get(run_name), registry, run_name


def _fused(
    middlewares: list[AgentMiddleware[Any, Any, Any]],
    summarization: SummarizationMiddleware | None,
    runs_carry_ids: bool = False,
    after: Sequence[AgentMiddleware[Any, Any, Any]] = (),
) -> list[AgentMiddleware[Any, Any, Any]]:
    """foldwise's stack as one node per hook: 5 checkpoints for a one-call turn, not 8.

    With `runs_carry_ids` (and memory off) it is 4: the run-start hooks join `before_model`.
    The nodes keep the summarization middleware's names (`SummarizationMiddleware.before_model`
    writes the compaction, as before). Its `before_model` runs the offload middleware's pasted
    input check itself, so the offload middleware's own copy is left out. A hook moved to
    another node must not pass a hook of the same kind in the middleware placed `after`
    foldwise's: LangChain runs their `after_model` hooks before foldwise's (they may change the
    answer or jump away) and their `before_agent` hooks after foldwise's.
    """
    if summarization is None:
        return middlewares
    offload = summarization.offload
    skip = [(offload, "before_model")] if offload is not None and offload in middlewares else []
    return fuse(
        middlewares,
        name=summarization.name,
        skip=skip,
        runs_have_ids=runs_carry_ids and not any(has_hook(m, "before_agent") for m in after),
        fold_after_model=not any(has_hook(m, "after_model") for m in after),
    )


def _start_memory_worker(agent: Any, middleware: MemoryMiddleware) -> None:
    """A worker thread applying the agent's memory queue, stopped when the agent is collected.

    It holds the agent only weakly (for the compaction commit check), so dropping the agent
    stops the thread instead of keeping both alive.
    """
    pipeline = middleware.pipeline
    if pipeline is None:
        return
    middleware.manager.setup()  # idempotent; the worker thread writes from the start
    pipeline.outbox.setup()
    check = graph_commit_check(agent)  # holds the graph weakly
    worker = MemoryWorker(middleware.manager, pipeline.outbox, commit_check=check)
    pipeline.worker = worker
    worker.start()
    # Not `stop`: the last reference may drop on the worker's own thread, which cannot join.
    weakref.finalize(agent, worker.request_stop)


def find_memory(agent: Any) -> MemoryMiddleware | None:
    """The `MemoryMiddleware` of an agent built by `create_agent`, if memory is on."""
    return _MEMORIES.get(agent)


def find_summarization(agent: Any) -> SummarizationMiddleware | None:
    """The `SummarizationMiddleware` of an agent built by `create_agent`, if any."""
    return _SUMMARIZERS.get(agent)
