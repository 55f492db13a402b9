"""What the model sees of memory: a stable profile and a recall section, within a token budget.

Both are plain text for the durable data block's ``memory_context`` channel (escaped and
indented there, behind the authority contract; never a system message). The profile is the
namespace's most important active facts in a fixed order, so it changes only when memory does
and the request prefix stays cacheable; recall follows it and holds the facts the current
request's search found that the profile does not already show, rendered after the latest user
message (`foldwise.durable.inject_recall`) so it never changes the history's cached prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from foldwise._steps import Steps
from foldwise._telemetry import span
from foldwise.memory._facts import Fact, Namespace
from foldwise.memory._manager import MemoryManager

__all__ = [
    "PROFILE_HEADING",
    "RECALL_HEADING",
    "choose_profile",
    "memory_context_steps",
    "render_memory",
]

PROFILE_HEADING = "## Remembered about the user (long-term memory from earlier threads)"
RECALL_HEADING = "## Recalled for this request"


def _line(fact: Fact) -> str:
    return f"- {' '.join(fact.text.split())} [{fact.category}, since {fact.valid_from:%Y-%m-%d}]"


def _within(facts: Sequence[Fact], budget: int, count: Callable[[str], int]) -> list[Fact]:
    chosen: list[Fact] = []
    used = 0
    for fact in facts:
        cost = count(_line(fact)) + 1
        if used + cost > budget:
            continue
        chosen.append(fact)
        used += cost
    return chosen


def choose_profile(active: Sequence[Fact], budget: int, count: Callable[[str], int]) -> list[Fact]:
    """The most important, most confident, oldest active facts that fit `budget` tokens.

    They come back in a stable order (by category, then when recorded).
    """
    ranked = sorted(active, key=lambda f: (-f.importance, -f.confidence, f.recorded_at, f.id))
    chosen = _within([f for f in ranked if f.status == "active"], budget, count)
    return sorted(chosen, key=lambda f: (f.category, f.recorded_at, f.id))


def render_memory(
    profile: Sequence[Fact],
    recall: Sequence[Fact],
    *,
    max_tokens: int,
    count: Callable[[str], int],
) -> dict[str, Any]:
    """The ``memory_context`` channel value: the profile text, the recall text, their ids.

    `profile` is shown as given (already within its share); `recall` gets what is left of
    `max_tokens`, skipping facts the profile shows. The profile (``text``) is rendered in the
    durable data block before the conversation, where it stays byte-identical until memory
    changes; the recall (``recall``) is rendered after the latest user message, so a new
    request's recall never changes the cached prefix of the history.
    """
    shown = {f.id for f in profile}
    profile_lines = [PROFILE_HEADING, *(_line(f) for f in profile)] if profile else []
    used = count("\n".join(profile_lines)) if profile_lines else 0
    left = max_tokens - used - count(RECALL_HEADING)
    extra = _within([f for f in recall if f.id not in shown], left, count)
    recall_lines = [RECALL_HEADING, *(_line(f) for f in extra)] if extra else []
    return {
        "text": "\n".join(profile_lines),
        "recall": "\n".join(recall_lines),
        "profile_ids": [f.id for f in profile],
        "recall_ids": [f.id for f in extra],
    }


def memory_context_steps(
    manager: MemoryManager,
    namespaces: Sequence[Namespace],
    query: str,
    *,
    max_tokens: int,
    recall_k: int,
    profile_share: float,
    count: Callable[[str], int],
) -> Steps[dict[str, Any]]:
    """Read the namespaces' facts and render the ``memory_context`` value for `query`.

    The profile comes from every namespace's active facts (the agent's own, then the ones the
    user shares with all agents); recall from a search of each, in that order, for `query`
    (the run's latest user message; empty: no recall).
    """
    active: list[Fact] = []
    recall: list[Fact] = []
    with span("foldwise.memory.recall", {"foldwise.memory.namespaces": len(namespaces)}) as sp:
        for namespace in namespaces:
            active += yield from manager.list_steps(namespace, status="active")
        profile = choose_profile(active, int(max_tokens * profile_share), count)
        if query and recall_k:
            for namespace in namespaces:
                recall += yield from manager.search_steps(namespace, query, k=recall_k)
        sp.set_attribute("foldwise.memory.active", len(active))
        sp.set_attribute("foldwise.memory.profile", len(profile))
        sp.set_attribute("foldwise.memory.recalled", len(recall[:recall_k]))
    return render_memory(profile, recall[:recall_k], max_tokens=max_tokens, count=count)
