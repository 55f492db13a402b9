"""`foldwise serve --demo`: the gateway on a temporary directory, pre-loaded with demo threads.

Everything lives in a fresh temporary directory (the SQLite database with threads, transcript,
receipts and memory; the artifacts), removed on exit. The server binds 127.0.0.1 with no API
key. Once uvicorn accepts connections, the demo threads are made through the gateway's own
routes (`foldwise.cli._demo_preload`); when they are done and the memory queue has drained,
exactly one line goes to stdout: ``foldwise demo ready: http://127.0.0.1:PORT/ui``. SIGINT /
SIGTERM stop it cleanly (exit status 0) at any point.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import typer

from foldwise.cli._demo_agents import DEMO_TRIGGER_FRACTION, DEMO_WINDOW, DemoAgents, demo_config
from foldwise.cli._demo_preload import PreloadError, preload_demo
from foldwise.cli._output import fail, fail_on_errors

__all__ = ["DEMO_HOST", "READY_PREFIX", "serve_demo"]

logger = logging.getLogger(__name__)

DEMO_HOST = "127.0.0.1"
"""The demo binds loopback only: it has no API key."""
READY_PREFIX = "foldwise demo ready: "
"""The start of the one stdout line printed when the demo is preloaded and serving."""
_PRELOAD_TIMEOUT = 300.0


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _bound_port(server: Any) -> int:
    """The port uvicorn listens on (the real one when asked for port 0)."""
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    raise PreloadError("demo: uvicorn reports no listening socket")


async def _serve(server: Any) -> int | str | None:
    """`server.serve()`, its exit status returned rather than raised.

    uvicorn exits a failed start-up with `sys.exit` and, after a graceful stop, raises the
    signal it caught again (SIGTERM: `_stopped`'s `SystemExit(0)`; SIGINT:
    `KeyboardInterrupt`). Raised inside a task, either would escape the event loop and leave
    the task's exception unretrieved.
    """
    try:
        await server.serve()
    except SystemExit as stop:
        return stop.code
    except KeyboardInterrupt:
        return 0
    return 0


async def _until_started(server: Any, serving: asyncio.Task[int | str | None]) -> bool:
    """Wait until uvicorn accepts connections; False when it stopped first."""
    while not server.started:
        if serving.done():
            return False
        await asyncio.sleep(0.01)
    return True


async def _preload_and_announce(
    server: Any, serving: asyncio.Task[int | str | None], agents: DemoAgents, started: float
) -> None:
    """Preload through HTTP, then print the ready line (unless a signal stopped the server).

    Raises:
        PreloadError: The preload failed (the server is stopped first).
    """
    if server.should_exit:  # a signal came as it started: its sockets may be closed already
        return
    url = f"http://{DEMO_HOST}:{_bound_port(server)}"
    # trust_env=False: an HTTP(S)_PROXY of the environment must not see loopback traffic.
    async with httpx.AsyncClient(base_url=url, timeout=_PRELOAD_TIMEOUT, trust_env=False) as client:
        preload = asyncio.create_task(preload_demo(client, agents))
        await asyncio.wait({serving, preload}, return_when=asyncio.FIRST_COMPLETED)
        if not preload.done() or server.should_exit:  # stopped by a signal while preloading
            preload.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError, PreloadError):
                await preload
            return
        error = preload.exception()
        if error is not None:
            server.should_exit = True
            await serving
            if isinstance(error, httpx.HTTPError):
                raise PreloadError(f"demo preload: {type(error).__name__}: {error}") from error
            raise error
    threads = preload.result()
    logger.info("foldwise demo: %d threads preloaded in %.2f s", len(threads), _since(started))
    typer.echo(f"{READY_PREFIX}{url}/ui")


async def _serve_and_preload(server: Any, agents: DemoAgents, started: float) -> int | str | None:
    """Run uvicorn, preload once it listens, serve until stopped; its exit status."""
    serving = asyncio.create_task(_serve(server))
    try:
        if await _until_started(server, serving):
            await _preload_and_announce(server, serving, agents, started)
        return await serving
    finally:
        if not serving.done():  # the preload failed in a way that left the server up
            server.should_exit = True
            await serving


def _since(started: float) -> float:
    return time.perf_counter() - started


def serve_demo(*, port: int, log_level: str, log_config: dict[str, Any]) -> None:
    """Serve the demo gateway on 127.0.0.1:`port` (0: a free port) until SIGINT / SIGTERM.

    Args:
        port: The TCP port; 0 picks a free one (the ready line names it).
        log_level: uvicorn's log level.
        log_config: The logging configuration (records on stderr).
    """
    import uvicorn

    from foldwise.gateway import create_app

    started = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        with fail_on_errors(), tempfile.TemporaryDirectory(prefix="foldwise-demo-") as tmp:
            agents = DemoAgents()
            application = create_app(
                demo_config(Path(tmp)), agent_factory=agents, shutdown_grace_seconds=5.0
            )
            options = uvicorn.Config(
                application,
                host=DEMO_HOST,
                port=port,
                log_config=log_config,
                log_level=log_level,
                lifespan="on",
                timeout_graceful_shutdown=5,
                server_header=False,
            )
            server = uvicorn.Server(options)
            logger.info(  # after uvicorn.Config, which configures logging
                "foldwise demo: temporary directory %s (window %d tokens, compaction at %d%%)",
                tmp,
                DEMO_WINDOW,
                round(DEMO_TRIGGER_FRACTION * 100),
            )
            status = asyncio.run(_serve_and_preload(server, agents, started))
    except KeyboardInterrupt:  # before uvicorn handles signals (or after)
        return
    except SystemExit as stop:  # `_stopped`, likewise
        status = stop.code
    finally:
        signal.signal(signal.SIGTERM, previous)
    if status not in (0, None):
        # uvicorn exits 3 when the lifespan fails, 1 when the port is taken.
        fail("the demo gateway could not start; the log above says why")
