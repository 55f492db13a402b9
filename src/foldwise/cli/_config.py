"""`foldwise config …`: validate a configuration and describe its effective settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from foldwise.cli._config_summary import render_summary, summarize_config
from foldwise.cli._output import (
    EXIT_USAGE,
    capture_warnings,
    echo_json,
    fail,
    stdout_console,
    warn,
)
from foldwise.cli._reference import reference_markdown, reference_rows
from foldwise.config import CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH, load_config
from foldwise.errors import ConfigError

__all__ = ["config_app"]

config_app = typer.Typer(
    help="Validate foldwise.yaml and show its effective settings.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


def _chosen_path(path: Path | None) -> str | None:
    """The file `load_config` will read, or `None` when it falls back to the defaults."""
    if path is not None:
        return str(path)
    from_env = os.environ.get(CONFIG_ENV_VAR)
    if from_env:
        return from_env
    return DEFAULT_CONFIG_PATH if Path(DEFAULT_CONFIG_PATH).is_file() else None


@config_app.command("check")
def check(
    path: Annotated[
        Path | None,
        typer.Argument(
            help=f"Configuration file. Default: ${CONFIG_ENV_VAR}, then {DEFAULT_CONFIG_PATH}; "
            "without either, the built-in defaults are checked.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Validate a configuration file and print its effective settings.

    Exits 2 with `error: <file>: <key>: <reason>` on the first invalid value. Triggers, keep and
    the budget are shown as resolved against the run model (the first model).
    """
    chosen = _chosen_path(path)
    with capture_warnings() as warnings_seen:
        try:
            config = load_config(chosen)
        except ConfigError as err:
            fail(str(err), code=EXIT_USAGE)
        summary = summarize_config(config, path=chosen)
    if chosen is None:
        warnings_seen.insert(
            0, f"no {DEFAULT_CONFIG_PATH} and no ${CONFIG_ENV_VAR}; showing the built-in defaults"
        )
    summary["warnings"] = warnings_seen
    for message in warnings_seen:
        warn(message)
    if as_json:
        echo_json(summary)
    else:
        stdout_console().print(render_summary(summary))


@config_app.command("reference")
def reference(
    as_json: Annotated[bool, typer.Option("--json", help="Print the fields as JSON.")] = False,
) -> None:
    """Print the reference of every configuration key (Markdown), generated from the models.

    `docs/configuration.md` embeds this output; a test keeps the two in sync.
    """
    if as_json:
        echo_json(reference_rows())
    else:
        typer.echo(reference_markdown(), nl=False)
