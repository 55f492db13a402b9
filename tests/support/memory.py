"""Wait for an agent's queued memory updates (the worker applies them in the background)."""

from __future__ import annotations

from typing import Any

from foldwise.agent import find_memory

__all__ = ["settle"]


def settle(agent: Any) -> None:
    """Apply everything the agent's memory queue holds now (debounce ignored)."""
    memory = find_memory(agent)
    assert memory is not None and memory.pipeline is not None
    assert memory.pipeline.worker is not None, "built with memory_worker=False"
    memory.pipeline.worker.flush(timeout=30)
