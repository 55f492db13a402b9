"""`foldwise serve`: run the gateway with uvicorn.

Registered on the root app by `_app.py`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from foldwise.cli._levels import LogLevel
from foldwise.cli._output import EXIT_USAGE, fail, fail_on_errors, warn
from foldwise.config import CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH, FoldwiseConfig, load_config
from foldwise.errors import FoldwiseError

__all__ = ["serve"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _log_config(level: str) -> dict[str, Any]:
    """Timestamped records of foldwise and uvicorn on stderr (applied in every worker)."""
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": _FORMAT}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "plain",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "foldwise": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"level": level},
        },
    }


async def _preflight(config: FoldwiseConfig) -> None:
    """Migrate the database once, before worker processes start."""
    from foldwise.gateway._checkpointer import open_checkpointer
    from foldwise.gateway.storage import open_storage

    async with open_storage(config.storage.url), open_checkpointer(config.storage.url):
        pass


def _options(
    config: FoldwiseConfig, host: str | None, port: int | None, level: str
) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments: the options override the configuration."""
    return {
        "host": host or config.gateway.host,
        "port": config.gateway.port if port is None else port,
        "log_config": _log_config(level),
        "log_level": level,
        "lifespan": "on",
        "timeout_graceful_shutdown": 15,
        "server_header": False,
    }


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _warn_if_open(config: FoldwiseConfig, host: str) -> None:
    """Warn when the gateway listens beyond this machine with nobody required to log in."""
    if not config.gateway.auth.enabled and not _is_loopback(host):
        warn(
            f"the gateway is bound to {host}, not loopback, without gateway.auth: anyone who "
            "can reach it can read and drive every thread. Configure gateway.auth.api_keys "
            "(or an authenticator), or bind 127.0.0.1."
        )


def _process_private(url: str) -> bool:
    """Whether a storage URL names a database that lives inside one process."""
    lowered = url.strip().lower()
    return lowered.startswith("memory:") or (
        lowered.startswith("sqlite:") and lowered.split("?", 1)[0].endswith("/:memory:")
    )


def _check_shared_storage(config: FoldwiseConfig, workers: int) -> None:
    """Refuse `--workers N` on an in-process database; warn on SQLite (one host, one writer)."""
    urls = {"storage.url": config.storage.url}
    if config.memory.enabled and config.memory.url:
        urls["memory.url"] = config.memory.url
    for key, url in urls.items():
        if _process_private(url):
            fail(
                f"--workers {workers}: {key} is {url}, a database private to each process, so "
                "the workers would not see each other's threads, runs or leases; set "
                f"{key} to postgresql://... (or a sqlite:/// file on this host), or use "
                "--workers 1",
                code=EXIT_USAGE,
            )
    if config.storage.url.strip().lower().startswith("sqlite:"):
        warn(
            f"--workers {workers} on SQLite: the workers share the file's single writer lock, so "
            "they add little throughput (docs/deployment.md); use PostgreSQL for several workers"
        )


def _run_workers(
    config: FoldwiseConfig, config_path: Path | None, workers: int, options: dict[str, Any]
) -> None:
    """Migrate once, then let uvicorn start `workers` processes that each build the app."""
    _check_shared_storage(config, workers)
    from foldwise.gateway._app import HOST_ENV_VAR

    with fail_on_errors():
        try:
            asyncio.run(_preflight(config))
        except FoldwiseError:
            raise
        except Exception as error:  # a database driver's connection error, with its reason
            fail(f"cannot start the gateway: {type(error).__name__}: {error}")
    if config_path is not None:
        # Each worker process loads the configuration itself, from the same file.
        os.environ[CONFIG_ENV_VAR] = str(config_path.resolve())
    # ... and the bound host (`--host`), one of the Host names it accepts by default.
    os.environ[HOST_ENV_VAR] = config.gateway.host
    _supervise(workers, options)


def _supervise(workers: int, options: dict[str, Any]) -> None:
    """Run uvicorn's supervisor of `workers` processes until SIGINT / SIGTERM.

    What `uvicorn.run` does with `workers`, plus the exit status: uvicorn stops the supervisor
    when a worker fails to start (its lifespan failed, e.g. an unreachable memory database),
    and `uvicorn.run` then returns as from a clean stop (exit 0).
    """
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    app = "foldwise.gateway:app_from_env"
    uv_config = uvicorn.Config(app, factory=True, workers=workers, **options)
    supervisor = Multiprocess(uv_config, sockets=[uv_config.bind_socket()])
    supervisor.run()
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        fail("the gateway's worker processes could not start; the log above says why")


def _run_single(application: Any, options: dict[str, Any]) -> None:
    """Serve `application` in this process until SIGINT / SIGTERM."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(application, **options))
    # uvicorn shuts down gracefully on SIGINT / SIGTERM, then re-raises the signal: make that
    # a clean exit (status 0) rather than a KeyboardInterrupt or a death by signal.
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    except SystemExit as stop:
        if stop.code not in (0, None):
            # uvicorn exits 3 when the lifespan fails (e.g. an unreachable database).
            fail("the gateway could not start; the log above says why")
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_demo(
    config_path: Path | None, host: str | None, port: int | None, level: str, workers: int
) -> None:
    """`serve --demo`: refuse the options it ignores, then run `serve_demo`."""
    from foldwise.cli._serve_demo import DEMO_HOST, serve_demo

    ignored = [
        name
        for name, given in (
            ("--config", config_path is not None),
            ("--host", host not in (None, DEMO_HOST)),
            ("--workers", workers != 1),
        )
        if given
    ]
    if ignored:
        drop = ", ".join(ignored)
        fail(f"--demo runs its own configuration on {DEMO_HOST}; drop {drop}", code=EXIT_USAGE)
    default_port = FoldwiseConfig().gateway.port
    serve_demo(
        port=default_port if port is None else port, log_level=level, log_config=_log_config(level)
    )


_ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"Configuration file. Default: ${CONFIG_ENV_VAR}, then {DEFAULT_CONFIG_PATH}, "
        "else the built-in defaults.",
        show_default=False,
    ),
]
_HostOption = Annotated[
    str | None, typer.Option("--host", help="Interface to bind (default: gateway.host).")
]
_PortOption = Annotated[
    int | None, typer.Option("--port", min=0, max=65535, help="TCP port (default: gateway.port).")
]
_LevelOption = Annotated[
    LogLevel, typer.Option("--log-level", case_sensitive=False, help="Server log level.")
]
_DemoOption = Annotated[
    bool,
    typer.Option(
        "--demo",
        help="Serve a demo on a temporary database: the shipped sessions pre-loaded as threads "
        "(replayed offline), memory facts, a scripted streaming model; 127.0.0.1, no API key.",
    ),
]
_WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        help="Worker processes on the same port, sharing storage.url (PostgreSQL; see "
        "docs/deployment.md). An in-memory database is refused.",
    ),
]


def serve(
    config_path: _ConfigOption = None,
    host: _HostOption = None,
    port: _PortOption = None,
    log_level: _LevelOption = LogLevel.info,
    workers: _WorkersOption = 1,
    demo: _DemoOption = False,
) -> None:
    """Serve foldwise agents over HTTP (LangGraph Server API plus `/compact`, `/transcript`).

    Binds 127.0.0.1:8420 unless the configuration or the options say otherwise. Stops cleanly
    on SIGINT / SIGTERM: in-flight runs get a grace period, then are interrupted without
    corrupting their threads. With `--demo`, nothing is read or written outside a temporary
    directory and one line, `foldwise demo ready: <url>`, is printed once the demo threads
    are loaded.
    """
    if demo:
        _serve_demo(config_path, host, port, log_level.value, workers)
        return
    from foldwise.agent import create_agent
    from foldwise.gateway import create_app
    from foldwise.gateway._telemetry import configure_from_env

    with fail_on_errors():
        config = load_config(config_path)
        if host is not None:  # the bound host is one of the default allowed Host names
            gateway = config.gateway.model_copy(update={"host": host})
            config = config.model_copy(update={"gateway": gateway})
        # A model or tool that cannot be built: one line, exit 2 (no memory worker: the
        # gateway runs its own; a second one here would race its start-up on the database).
        create_agent(config, memory_worker=False)
        application = create_app(config, freeze_startup_objects=True)
    options = _options(config, host, port, log_level.value)
    _warn_if_open(config, options["host"])
    if workers > 1:
        _run_workers(config, config_path, workers, options)  # each worker: `app_from_env`
    else:
        configure_from_env()  # OpenTelemetry from OTEL_*, when asked for (docs/observability.md)
        _run_single(application, options)
