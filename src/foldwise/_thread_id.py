"""The one answer to "which thread is this run?", for every component that keys data by thread.

Archives, offloaded user input and tool output are stored under a thread id, and the
`read_offloaded` / `search_offloaded` tools look them up under a thread id. Both sides must
agree even when the run has no thread (no checkpointer): otherwise the durable block advertises
an archive the model cannot open. So every component resolves the thread here.
"""

from __future__ import annotations

from collections.abc import Mapping

from langgraph.config import get_config

__all__ = ["NO_THREAD", "configured", "current_config", "resolve_thread_id"]

NO_THREAD = "foldwise:no-thread"
"""The thread of a run that has none (no checkpointer and no `configurable.thread_id`)."""


def configured(config: object, key: str = "thread_id") -> str | None:
    """``config["configurable"][key]`` as a string, or `None` when absent or empty."""
    if not isinstance(config, Mapping):
        return None
    configurable = config.get("configurable")
    value = configurable.get(key) if isinstance(configurable, Mapping) else None
    return None if value is None or value == "" else str(value)


def current_config() -> object:
    """The config of the LangGraph run this is called from, or `None` outside a run."""
    try:
        return get_config()
    except RuntimeError:  # not inside a LangGraph run
        return None


def resolve_thread_id(runtime_or_config: object = None) -> str:
    """The thread id of the current run, or `NO_THREAD`.

    Looks, in order, at a LangGraph `Runtime` / `ToolRuntime` (`execution_info.thread_id`, then
    a `ToolRuntime`'s `config`), at a `RunnableConfig` mapping (`configurable.thread_id`), and at
    the config of the LangGraph run this is called from (`langgraph.config.get_config()`).

    Args:
        runtime_or_config: A runtime, a config mapping, or None (only the current run counts).

    Returns:
        The thread id as a string; `NO_THREAD` when none of them names a thread.
    """
    info = getattr(runtime_or_config, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is not None and thread != "":
        return str(thread)
    config = getattr(runtime_or_config, "config", runtime_or_config)
    return configured(config) or configured(current_config()) or NO_THREAD
