"""Log levels accepted by `--log-level` (shared by the root app and `serve`)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["LogLevel"]


class LogLevel(StrEnum):
    """Levels accepted by `--log-level`."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"
