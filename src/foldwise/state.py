"""`FoldwiseState`: the agent state schema with foldwise's durable channels."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState

from foldwise.compaction._receipt import append_receipts
from foldwise.durable._delegations import merge_delegations
from foldwise.durable._skills import merge_skill_context
from foldwise.offload._reducer import merge_offloads

__all__ = ["FoldwiseState"]


class FoldwiseState(AgentState[Any]):
    """Agent state with the channels that survive compaction.

    - `summary_text`: the rolling summary (last write wins), rendered as data, never a message.
    - `compactions`: the newest 50 compaction receipts.
    - `delegations`: the ledger of sub-agent tasks (newest 50; terminal states never regress).
    - `skill_context`: references to loaded `SKILL.md` files (newest 8, deduplicated by path).
    - `offloads`: references to artifacts stored outside the context (newest 50).
    - `memory_context`: what long-term memory shows this thread (profile and recall), written
      by `MemoryMiddleware` when it changes.
    - `memory_queued_through`: the id of the last message long-term memory has queued.
    """

    summary_text: NotRequired[str | None]
    compactions: NotRequired[Annotated[list[dict[str, Any]], append_receipts]]
    delegations: NotRequired[Annotated[list[dict[str, Any]], merge_delegations]]
    skill_context: NotRequired[Annotated[list[dict[str, Any]], merge_skill_context]]
    offloads: NotRequired[Annotated[list[dict[str, Any]], merge_offloads]]
    memory_context: NotRequired[dict[str, Any]]
    memory_queued_through: NotRequired[str | None]
