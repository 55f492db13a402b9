"""Output helpers shared by every command: one-line errors, warnings, logging, consoles."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console

from foldwise.errors import FoldwiseError, UsageError

__all__ = [
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "capture_warnings",
    "configure_logging",
    "echo_json",
    "fail",
    "fail_on_errors",
    "stdout_console",
    "warn",
]

EXIT_USAGE = 2
"""Exit code of misuse: an invalid configuration, argument or file (like Click's usage errors)."""
EXIT_RUNTIME = 1
"""Exit code of a valid request that failed while running."""

_LOGGER_NAME = "foldwise"


def stdout_console() -> Console:
    """A console on the current stdout; rich decides about colour and width (plain off a TTY)."""
    return Console(highlight=False)


def fail(message: str, *, code: int = EXIT_RUNTIME) -> NoReturn:
    """Print `error: <message>` as one line on stderr and exit with `code`."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print `warning: <message>` as one line on stderr."""
    typer.echo(f"warning: {' '.join(message.split())}", err=True)


def echo_json(data: Any) -> None:
    """Print `data` as indented JSON on stdout, without any rich markup."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


@contextmanager
def fail_on_errors() -> Iterator[None]:
    """Turn foldwise errors into one-line reasons: misuse exits 2, runtime failures exit 1."""
    try:
        yield
    except UsageError as err:
        fail(str(err), code=EXIT_USAGE)
    except FoldwiseError as err:
        fail(str(err), code=EXIT_RUNTIME)


class _Collector(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


@contextmanager
def capture_warnings() -> Iterator[list[str]]:
    """Collect Python warnings and foldwise log warnings raised inside the block, in order.

    Nothing is printed while the block runs; the caller decides how to show the list.
    """
    collected: list[str] = []
    logger = logging.getLogger(_LOGGER_NAME)
    saved = (logger.handlers[:], logger.propagate, logger.level)
    collector = _Collector(collected)
    logger.handlers = [collector]
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")

            def record(message: Warning | str, *_args: Any, **_kwargs: Any) -> None:
                collected.append(str(message))

            warnings.showwarning = record
            yield collected
    finally:
        logger.handlers, logger.propagate, logger.level = saved


class _StderrHandler(logging.Handler):
    """Writes `level: message` lines to whatever `sys.stderr` is at the time of the record."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"{record.levelname.lower()}: {record.getMessage()}\n")
        except Exception:  # pragma: no cover - logging must never crash the command
            self.handleError(record)


def configure_logging(level: str | None) -> None:
    """Send foldwise's log records to stderr as `warning: …` lines (idempotent).

    Args:
        level: `debug`, `info`, `warning` or `error`; `None` leaves the logger's level alone
            and shows warnings and errors.
    """
    logger = logging.getLogger(_LOGGER_NAME)
    for handler in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(handler)
    handler = _StderrHandler(logging.WARNING if level is None else level.upper())
    logger.addHandler(handler)
    if level is not None:
        logger.setLevel(level.upper())
