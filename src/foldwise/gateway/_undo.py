"""Undoing after a cancel: close the tool calls a run left open, or roll the run back."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import END

from foldwise.gateway._active import ActiveRun
from foldwise.gateway._messages import interrupted_results
from foldwise.gateway.storage import GatewayStorage

__all__ = ["at_checkpoint", "head_id", "repair_open_calls", "revert_run"]

logger = logging.getLogger(__name__)


def head_id(snapshot: Any) -> str | None:
    """The checkpoint id a state snapshot is at, if any."""
    configurable = (getattr(snapshot, "config", None) or {}).get("configurable") or {}
    value = configurable.get("checkpoint_id")
    return value if isinstance(value, str) else None


def at_checkpoint(config: RunnableConfig, checkpoint_id: str) -> RunnableConfig:
    """`config` pointing at one checkpoint of the thread."""
    configurable = {**(config.get("configurable") or {}), "checkpoint_id": checkpoint_id}
    return {**config, "configurable": configurable}


async def repair_open_calls(run: ActiveRun, config: RunnableConfig) -> None:
    """Give tool calls the cancelled run left open an error result (best effort).

    Tools of the cancelled step that had finished keep their results: their writes (pending
    on the head checkpoint, which a state update would leave behind) are applied first.
    """
    configurable = dict(config.get("configurable") or {})
    configurable.pop("checkpoint_id", None)  # a fork's run: its head, not its start
    config = {**config, "configurable": configurable}
    try:
        graph = run.spec.hosted.graph
        snapshot = await graph.aget_state(config)
        results = interrupted_results(list((snapshot.values or {}).get("messages") or []))
        if results:
            if any(task.result is not None for task in snapshot.tasks):
                # Applies the finished tasks' writes and ends the step's other tasks.
                await graph.aupdate_state(config, None, as_node=END)
                kept = list(((await graph.aget_state(config)).values or {}).get("messages") or [])
                await run.recorder.messages(kept)
            await graph.aupdate_state(config, {"messages": results}, as_node="tools")
            await run.recorder.messages(results)
    except Exception:
        logger.exception(
            "thread %s: could not close the tool calls of run %s", run.thread_id, run.run_id
        )


async def revert_run(run: ActiveRun, config: RunnableConfig, storage: GatewayStorage) -> bool:
    """Roll back: the thread's head goes back to where the run started; the row goes.

    The run's checkpoints stay in the history as an abandoned branch (the head is a copy of
    the start checkpoint); a thread that had none loses its checkpoints. Returns whether
    it worked (else the run is finished `interrupted` as after a plain cancel).
    """
    graph = run.spec.hosted.graph
    configurable = dict(config.get("configurable") or {})
    configurable.pop("checkpoint_id", None)
    config = {**config, "configurable": configurable}
    try:
        if run.start_checkpoint is None:
            await graph.checkpointer.adelete_thread(run.thread_id)
        else:
            start = at_checkpoint(config, run.start_checkpoint)
            await graph.aupdate_state(start, None, as_node="__copy__")
        await storage.delete_run(run.run_id, thread_id=run.thread_id)
    except Exception:
        logger.exception("thread %s: could not roll back run %s", run.thread_id, run.run_id)
        return False
    return True
