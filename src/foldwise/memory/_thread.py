"""Provenance of a memory write made inside a run: its thread and run ids."""

from __future__ import annotations

from collections.abc import Mapping

from foldwise._thread_id import NO_THREAD, resolve_thread_id
from foldwise.memory._facts import FactSource

__all__ = ["run_source"]


def run_source(
    runtime_or_config: object, *, via: str, message_ids: tuple[str, ...] = ()
) -> FactSource:
    """A `FactSource` naming the run's thread (none outside a thread) and run id."""
    thread = resolve_thread_id(runtime_or_config)
    config = getattr(runtime_or_config, "config", runtime_or_config)
    run_id = None
    if isinstance(config, Mapping):
        value = config.get("run_id") or (config.get("metadata") or {}).get("run_id")
        run_id = None if value is None else str(value)
    return FactSource(
        thread_id=None if thread == NO_THREAD else thread,
        message_ids=message_ids,
        run_id=run_id,
        via=via,
    )
