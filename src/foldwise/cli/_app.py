"""The root `foldwise` Typer app; each command group lives in its own module.

To add a group, write `_<group>.py` with a `typer.Typer()` and register it below with
`app.add_typer(...)`; a single top-level command is registered with `app.command(...)`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from foldwise.cli._bench import bench_app
from foldwise.cli._config import config_app
from foldwise.cli._levels import LogLevel
from foldwise.cli._memory import memory_app
from foldwise.cli._offload import offload_app
from foldwise.cli._output import configure_logging
from foldwise.cli._replay import demo, replay
from foldwise.cli._serve import serve

__all__ = ["app", "main"]

app = typer.Typer(
    name="foldwise",
    help="Context management for long-running LangChain / LangGraph agents.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,  # locals may hold API keys
)
app.add_typer(config_app, name="config")
app.add_typer(bench_app, name="bench")
app.add_typer(offload_app, name="offload")
app.add_typer(memory_app, name="memory")
app.command("serve")(serve)
app.command("replay")(replay)
app.command("demo")(demo)


def _version(value: bool) -> None:
    if value:
        from foldwise import __version__

        typer.echo(f"foldwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the foldwise version and exit.",
        ),
    ] = False,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level",
            case_sensitive=False,
            help="Show foldwise log records from this level on (stderr). Default: warning.",
        ),
    ] = None,
) -> None:
    """Context management for long-running LangChain / LangGraph agents."""
    if log_level is not None:
        configure_logging(log_level.value)


def main() -> None:
    """Entry point of the `foldwise` console script."""
    configure_logging(None)
    app()
