"""`create_app(config)`: the FastAPI application of the gateway, with its lifespan.

The lifespan opens the gateway storage, LangGraph's checkpointer and store (`/store/*`) and,
with `memory.enabled`, the memory manager of `/memory/*` once; it builds the default agent (so
a broken model configuration fails at start-up, not on the first request), and on shutdown
stops accepting work, lets runs finish for a grace period, cancels the rest (each ends
`interrupted` with its lease released) and closes what it opened.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from foldwise.config import FoldwiseConfig, load_config
from foldwise.gateway._agents import AgentFactory, AgentRegistry
from foldwise.gateway._artifacts import router as artifacts_routes
from foldwise.gateway._assistants import router as assistants_routes
from foldwise.gateway._audit_log import router as audit_log_routes
from foldwise.gateway._auth import Authenticator, AuthMiddleware
from foldwise.gateway._background import router as background_routes
from foldwise.gateway._calls import router as calls_routes
from foldwise.gateway._checkpointer import open_checkpointer
from foldwise.gateway._compact import router as compact_routes
from foldwise.gateway._context import router as context_routes
from foldwise.gateway._deps import Gateway
from foldwise.gateway._errors import ErrorGuardMiddleware, install_error_handlers
from foldwise.gateway._health import router as health_routes
from foldwise.gateway._http import (
    CrossSiteMiddleware,
    HostMiddleware,
    JsonBodyMiddleware,
    add_cors,
)
from foldwise.gateway._langgraph_store import open_store
from foldwise.gateway._leases import ThreadLeases
from foldwise.gateway._limits import BodyLimitMiddleware
from foldwise.gateway._manager import RunManager
from foldwise.gateway._memory import router as memory_routes
from foldwise.gateway._overview import router as overview_routes
from foldwise.gateway._queue import DEFAULT_QUEUE_POLL, RunQueue
from foldwise.gateway._runs import router as runs_routes
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway._stateless import router as stateless_routes
from foldwise.gateway._store import router as store_routes
from foldwise.gateway._stream import (
    DEFAULT_STREAM_BUFFER_BYTES,
    DEFAULT_STREAM_BUFFER_EVENTS,
    EventBuffer,
)
from foldwise.gateway._telemetry import configure_from_env
from foldwise.gateway._threads import router as threads_routes
from foldwise.gateway._ui import router as ui_routes
from foldwise.gateway.storage import open_storage
from foldwise.memory import MemoryManager, MemoryOutbox, MemoryWorker, open_outbox
from foldwise.memory._pipeline import checkpointer_commit_check

__all__ = ["DEFAULT_SHUTDOWN_GRACE", "HOST_ENV_VAR", "app_from_env", "create_app"]

logger = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_GRACE = 10.0
"""Seconds in-flight runs get to finish on shutdown before they are cancelled."""


_ROUTERS = (
    health_routes,
    overview_routes,  # before the thread routes: `/threads/overview` is not a thread id
    threads_routes,
    runs_routes,
    background_routes,
    stateless_routes,
    compact_routes,
    audit_log_routes,
    context_routes,
    calls_routes,
    artifacts_routes,
    assistants_routes,
    store_routes,
    memory_routes,
    ui_routes,
)
"""One router per resource, in the order their routes are matched."""


_MEMORY_DRAIN_SECONDS = 10.0
"""On shutdown the memory worker finishes or releases its batch within this."""


_Memory = tuple[MemoryManager, MemoryOutbox, MemoryWorker]
"""The memory manager, the write queue and this process's worker."""


@asynccontextmanager
async def _open_memory(
    config: FoldwiseConfig, checkpointer: BaseCheckpointSaver[Any]
) -> AsyncIterator[_Memory | None]:
    """With `memory.enabled`: the manager, the write queue and this process's worker.

    The manager serves `/memory/*`; the agents' runs and compactions fill the queue; the
    worker applies it and, on exit, finishes or releases its batch and leaves the rest queued.
    """
    if not config.memory.enabled:
        yield None
        return
    # Building the backend may connect and the extractor may build a model: off the loop.
    memory = await asyncio.to_thread(MemoryManager.from_config, config)
    url = config.memory.url or config.storage.url
    outbox = await asyncio.to_thread(open_outbox, url)
    worker = MemoryWorker(memory, outbox, commit_check=checkpointer_commit_check(checkpointer))
    try:
        await memory.asetup()
        await outbox.asetup()
        await worker.astart()
        yield memory, outbox, worker
    finally:
        await worker.astop(_MEMORY_DRAIN_SECONDS)
        await outbox.aclose()
        await memory.aclose()


@asynccontextmanager
async def _databases(
    config: FoldwiseConfig,
) -> AsyncIterator[tuple[BaseCheckpointSaver[Any], BaseStore, _Memory | None]]:
    """The checkpointer, the store and the memory manager, opened together, closed on exit."""
    async with (
        open_checkpointer(config.storage.url) as checkpointer,
        _open_memory(config, checkpointer) as memory,
        open_store(config.storage.url) as store,
    ):
        yield checkpointer, store, memory


def _ready(backend: str, agents: AgentRegistry, *, freeze: bool) -> None:
    ids = ", ".join(agents.assistant_ids)
    logger.info("foldwise gateway ready (storage: %s, assistants: %s)", backend, ids)
    if freeze:
        gc.collect()  # start-up's own garbage is freed, not frozen
        gc.freeze()


def create_app(
    config: FoldwiseConfig,
    *,
    agent_factory: AgentFactory | None = None,
    lease_ttl_seconds: float | None = None,
    shutdown_grace_seconds: float = DEFAULT_SHUTDOWN_GRACE,
    stream_buffer_events: int = DEFAULT_STREAM_BUFFER_EVENTS,
    stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER_BYTES,
    queue_poll_seconds: float = DEFAULT_QUEUE_POLL,
    freeze_startup_objects: bool = False,
) -> FastAPI:
    """Build the gateway's FastAPI application.

    Args:
        config: The configuration (`storage.url`, `gateway.max_body_bytes`, models, tools...).
        agent_factory: Builds the agents (default: `foldwise.create_agent` from the config).
            It receives an `AgentRequest` and returns a compiled graph or a `HostedAgent`; the
            graph must use the request's checkpointer.
        lease_ttl_seconds: How long a thread lease lasts without renewal (renewed every third);
            `None`: `gateway.lease_ttl_seconds`.
        shutdown_grace_seconds: How long runs may finish on shutdown before being cancelled.
        stream_buffer_events: Frames an SSE client may lag by before its stream ends (error).
        stream_buffer_bytes: Bytes of frames an SSE client may fall behind by, likewise.
        queue_poll_seconds: How often the run queue is read for runs other workers queued.
        freeze_startup_objects: Once started, `gc.freeze` every object alive (modules,
            graphs, connections): full collections then scan only what requests made. For a
            process serving only this app (`foldwise serve`); frozen objects are never freed.

    Returns:
        The application; run it with uvicorn (`foldwise serve` does).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = open_storage(config.storage.url)
        await storage.setup()
        try:
            async with _databases(config) as (checkpointer, store, memory):
                manager, outbox, worker = memory or (None, None, None)
                agents = AgentRegistry(config, checkpointer, agent_factory, memory_worker=worker)
                agents.get()  # fail at start-up on a broken model or tool configuration
                leases = ThreadLeases(
                    storage, ttl=lease_ttl_seconds or config.gateway.lease_ttl_seconds
                )
                new_buffer = partial(
                    EventBuffer, max_events=stream_buffer_events, max_bytes=stream_buffer_bytes
                )
                runs = RunManager(storage, leases, new_buffer=new_buffer)
                queue = RunQueue(runs, agents.get, poll_seconds=queue_poll_seconds)
                await queue.open()  # dead workers' runs end `error`; queued ones get dispatched
                app.state.gateway = Gateway(
                    config,
                    storage,
                    checkpointer,
                    agents,
                    leases,
                    runs,
                    queue,
                    store=store,
                    memory=manager,
                    memory_queue=outbox,
                )
                _ready(storage.backend, agents, freeze=freeze_startup_objects)
                try:
                    yield
                finally:
                    await queue.stop()
                    await runs.shutdown(shutdown_grace_seconds)
                    await agents.aclose()  # background summaries: nothing left pending
                    logger.info("foldwise gateway stopped")
        finally:
            await storage.aclose()

    return _application(config, lifespan)


def _application(config: FoldwiseConfig, lifespan: Any) -> FastAPI:
    app = FastAPI(
        title="foldwise gateway",
        summary="foldwise agents with persistent threads, manual compaction and full transcripts",
        lifespan=lifespan,
        default_response_class=JSONResponse,
    )
    install_error_handlers(app)
    for router in _ROUTERS:
        app.include_router(router)
    _install_middleware(app, config)
    return app


def _install_middleware(app: FastAPI, config: FoldwiseConfig) -> None:
    # Added innermost first. Outside in: error guard, Host check, cross-site refusal, CORS (so a
    # 401 still carries its headers and preflights need no key), auth, body limit, JSON
    # whatever the type.
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.gateway.max_body_bytes)
    app.add_middleware(AuthMiddleware, authenticator=Authenticator(config.gateway.auth))
    add_cors(app, config.gateway.cors_origins)
    app.add_middleware(CrossSiteMiddleware, origins=config.gateway.cors_origins)
    app.add_middleware(HostMiddleware, config=config.gateway)
    app.add_middleware(ErrorGuardMiddleware)  # outermost of ours: wraps the body limit too


HOST_ENV_VAR = "FOLDWISE_GATEWAY_HOST"
"""Overrides `gateway.host` in `app_from_env` (`foldwise serve --host` with `--workers`)."""


def app_from_env() -> FastAPI:
    """Zero-argument factory for ``uvicorn --factory``: the app of `$FOLDWISE_CONFIG`.

    `foldwise serve --workers N` uses it; so can ``uvicorn --factory --workers N
    foldwise.gateway:app_from_env``. `$FOLDWISE_GATEWAY_HOST`, when set, replaces
    `gateway.host` (the bound host is one of the default allowed `Host` names), as
    `foldwise serve --host` does for one process.
    """
    configure_from_env()  # a worker process of `foldwise serve --workers N`: its own exporters
    config = load_config()
    host = os.environ.get(HOST_ENV_VAR)
    if host:
        gateway = config.gateway.model_copy(update={"host": host})
        config = config.model_copy(update={"gateway": gateway})
    return create_app(config, freeze_startup_objects=True)
