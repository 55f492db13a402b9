"""A streamed compaction receipt is recorded only once the checkpoint holding it is saved.

LangGraph streams a step's values before it saves the step's checkpoint. The crash campaign
(`foldwise bench reliability --area crash`, 200 kills on SQLite) found receipts and transcript
markers of automatic compactions that a SIGKILL then lost from the state (I3). The run now holds
a streamed state back until the checkpoint has its new receipts (`committed_values`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from foldwise.gateway._capture import TranscriptRecorder, committed_values

RECEIPT = {"id": "cmp_new", "trigger": "tokens"}


class _LaggingGraph:
    """`aget_state` shows the receipt only from read number `lag` on (never with `lag=0`)."""

    def __init__(self, lag: int) -> None:
        self.lag, self.reads = lag, 0

    async def aget_state(self, config: dict[str, Any]) -> SimpleNamespace:
        self.reads += 1
        held = self.lag and self.reads >= self.lag
        return SimpleNamespace(values={"compactions": [RECEIPT] if held else []})


def _recorder(**known: Any) -> TranscriptRecorder:
    return TranscriptRecorder(None, "t", "r", **known)  # type: ignore[arg-type]  # no writes


async def test_a_receipt_waits_for_its_checkpoint() -> None:
    graph = _LaggingGraph(lag=5)
    values = {"messages": [], "compactions": [RECEIPT]}
    assert await committed_values(graph, _recorder(), values) is values
    assert graph.reads == 5


async def test_a_receipt_its_checkpoint_never_shows_is_not_recorded() -> None:
    graph = _LaggingGraph(lag=0)
    values = {"messages": ["m"], "compactions": [RECEIPT]}
    kept = await committed_values(graph, _recorder(), values, wait_seconds=0.05)
    assert kept == {"messages": ["m"], "compactions": []}
    assert graph.reads > 1


async def test_nothing_new_reads_nothing() -> None:
    graph = _LaggingGraph(lag=0)
    values = {"messages": [], "compactions": [RECEIPT]}
    assert await committed_values(graph, _recorder(known_receipts=["cmp_new"]), values) is values
    assert await committed_values(graph, _recorder(), {"messages": []}) == {"messages": []}
    assert graph.reads == 0
