"""Extraction: from transcript entries to the structured content of a summary.

Everything here is a single pass over the entries with per-message caps, so a transcript of
megabytes costs linear time, and the same entries always give the same `SummaryDoc`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from foldwise.compaction._transcript import TranscriptEntry
from foldwise.summarizers._cues import (
    CONSTRAINT_RE,
    DECISION_RE,
    ERROR_RE,
    NEXT_RE,
    PROSE_ERROR_RE,
    REASON_START_RE,
    find_artifacts,
    one_line,
    split_sentences,
)
from foldwise.summarizers._languages import detect_language

__all__ = [
    "LIST_KEYS",
    "SENTENCE_CHARS",
    "VERBATIM_CHARS",
    "Item",
    "ItemList",
    "ListKey",
    "SummaryDoc",
    "ToolUsage",
    "distinctive_arg",
    "error_lines",
    "extract_doc",
]

ListKey = Literal["constraints", "decisions", "artifacts", "errors", "next"]
LIST_KEYS: tuple[ListKey, ...] = ("constraints", "decisions", "artifacts", "errors", "next")

VERBATIM_CHARS = 8_000  # kept before budgeting; the budget cuts further
SENTENCE_CHARS = 300
ERROR_CHARS = 240
ARTIFACT_CHARS = 200
ARG_CHARS = 80
ARGS_PER_TOOL = 3
_SCAN_CHARS = 200_000  # sentence cues are looked for in a message's head and tail only
_TOOL_SCAN = (32_000, 8_000)  # artifacts in tool output: its head and tail only
_PER_MESSAGE = {"constraints": 6, "decisions": 6, "next": 8}
_ARTIFACTS_PER_MESSAGE = 30
_ARTIFACTS_PER_TOOL_RESULT = 12
_ERROR_HEAD, _ERROR_TAIL = 1, 3
_NEXT_FROM_LAST_AI = 3
_ARG_KEYS = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "url",
    "query",
    "q",
    "command",
    "cmd",
    "pattern",
    "name",
    "id",
)
_SPACE_RE = re.compile(r"\s+")
_NAMED_ERROR_RE = re.compile(r"[A-Za-z0-9_](?:Error|Exception|Timeout)\b|错误|异常")
_TRACEBACK_HEADER = "Traceback (most recent call last):"
_ARG_FALLBACK_RE = re.compile(r'"(?:' + "|".join(_ARG_KEYS) + r')"\s*:\s*"([^"\\\n]{1,200})"')


@dataclass
class Item:
    """One list entry: its text, priority tier (0 high) and when it was first and last seen."""

    text: str
    tier: int
    first: int
    last: int


@dataclass
class ItemList:
    """Items deduplicated by case- and whitespace-insensitive text, in first-seen order."""

    items: dict[str, Item] = field(default_factory=dict)
    clock: int = 0

    def add(self, text: str, tier: int = 0) -> None:
        """Record a sighting of `text`; a repeat refreshes its recency and best tier."""
        key = _SPACE_RE.sub(" ", text).strip().casefold()
        if not key:
            return
        self.clock += 1
        found = self.items.get(key)
        if found is None:
            self.items[key] = Item(text, tier, self.clock, self.clock)
        else:
            found.last = self.clock
            found.tier = min(found.tier, tier)

    def extend(self, other: ItemList) -> None:
        """Add the items of `other` in their first-seen order, keeping their tiers."""
        for item in other.ordered():
            self.add(item.text, item.tier)

    def ordered(self) -> list[Item]:
        """Items in first-seen order."""
        return list(self.items.values())

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class ToolUsage:
    """How often one tool was called, with a few distinctive arguments (newest last).

    `count` 0 marks a line carried over verbatim from a summary foldwise did not write.
    """

    name: str
    count: int
    args: list[str]
    last: int = 0

    def add_arg(self, value: str | None) -> None:
        """Remember `value` as the newest distinctive argument."""
        if not value:
            return
        if value in self.args:
            self.args.remove(value)
        self.args.append(value)
        del self.args[:-ARGS_PER_TOOL]


@dataclass
class SummaryDoc:
    """The structured content of one summary, before it is fitted to a budget."""

    intent: str | None = None
    latest: str | None = None
    lists: dict[ListKey, ItemList] = field(
        default_factory=lambda: {key: ItemList() for key in LIST_KEYS}
    )
    tools: dict[str, ToolUsage] = field(default_factory=dict)
    language: str | None = None
    tool_clock: int = 0

    def use_tool(self, name: str, count: int, args: Iterable[str], *, last: int = 0) -> None:
        """Merge `count` calls of `name` with their distinctive arguments.

        `last` places the use in time (default: now, after every earlier use).
        """
        if last > 0:
            stamp = last
            self.tool_clock = max(self.tool_clock, last)
        else:
            self.tool_clock += 1
            stamp = self.tool_clock
        usage = self.tools.get(name)
        if usage is None:
            usage = self.tools[name] = ToolUsage(name, 0, [])
        usage.count += count
        usage.last = max(usage.last, stamp)
        for arg in args:
            usage.add_arg(arg)


def distinctive_arg(arguments: str) -> str | None:
    """Pick the argument value that best identifies one call (a path, URL, query, ...)."""
    value: Any = None
    if len(arguments) <= 20_000:
        try:
            value = json.loads(arguments)
        except ValueError:
            value = None
    if isinstance(value, dict):
        for key in _ARG_KEYS:
            candidate = value.get(key)
            if isinstance(candidate, str | int | float) and not isinstance(candidate, bool):
                text = str(candidate)
                if text.strip() and "\n" not in text and len(text) <= 200:
                    return one_line(text, ARG_CHARS).replace("`", "'")
        for candidate in value.values():
            if (
                isinstance(candidate, str)
                and candidate.strip()
                and "\n" not in candidate
                and len(candidate) <= 120
            ):
                return one_line(candidate, ARG_CHARS).replace("`", "'")
        return None
    match = _ARG_FALLBACK_RE.search(arguments)
    return one_line(match.group(1), ARG_CHARS).replace("`", "'") if match else None


def _head_tail(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


def _scan_window(text: str) -> str:
    return _head_tail(text, _SCAN_CHARS, _SCAN_CHARS)


def _cue_sentences(text: str, cue: re.Pattern[str], limit: int, *, with_reason: bool) -> list[str]:
    sentences = split_sentences(_scan_window(text))
    out: list[str] = []
    index = 0
    while index < len(sentences) and len(out) < limit:
        sentence = sentences[index]
        index += 1
        if not cue.search(sentence):
            continue
        if with_reason and index < len(sentences) and REASON_START_RE.match(sentences[index]):
            sentence = f"{sentence} {sentences[index]}"
            index += 1
        out.append(one_line(sentence, SENTENCE_CHARS))
    return out


def error_lines(text: str, cue: re.Pattern[str] = ERROR_RE) -> list[str]:
    """Lines carrying an error cue: the first and the last few of the message."""
    found: list[str] = []
    position = 0
    while True:
        match = cue.search(text, position)
        if match is None:
            break
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        position = end + 1
        line = text[start:end].strip()
        if not line or line == _TRACEBACK_HEADER:
            continue
        if len(line) > ERROR_CHARS:
            left = max(start, match.start() - ERROR_CHARS // 3)
            line = "…" + text[left : min(end, left + ERROR_CHARS)].strip()
        found.append(one_line(line, ERROR_CHARS))
    if len(found) > _ERROR_HEAD + _ERROR_TAIL:
        found = found[:_ERROR_HEAD] + found[-_ERROR_TAIL:]
    return found


def _plan_sentences(text: str) -> list[str]:
    """Sentences stating a plan, plus the list items under a plan line ending with a colon."""
    out: list[str] = []
    under_plan = False
    for raw in _scan_window(text).split("\n"):
        line = raw.strip()
        if not line:
            continue
        is_item = bool(re.match(r"(?:[-*•+]|\d{1,3}[.)])\s+", line))
        if under_plan and is_item:
            out.extend(split_sentences(line)[:1])
            continue
        under_plan = False
        for sentence in split_sentences(line):
            if NEXT_RE.search(sentence):
                out.append(sentence)
        if NEXT_RE.search(line) and line.endswith((":", "：")):
            under_plan = True
    return [one_line(s, SENTENCE_CHARS) for s in out]


def extract_doc(entries: Sequence[TranscriptEntry]) -> SummaryDoc:
    """Extract every section's content from transcript entries.

    Args:
        entries: Parsed or freshly built transcript entries, oldest first.

    Returns:
        The unbounded-but-capped content; `fit_summary` applies the token budget.
    """
    doc = SummaryDoc()
    lists = doc.lists
    humans = [e for e in entries if e.role == "human" and e.content.strip()]
    if humans:
        doc.intent = humans[0].content.strip()[:VERBATIM_CHARS]
        doc.latest = humans[-1].content.strip()[:VERBATIM_CHARS]
    ai_texts: list[str] = []
    tool_results: dict[str, int] = {}
    called = False
    for entry in entries:
        text = entry.content
        if entry.role == "human":
            for sentence in _cue_sentences(
                text, CONSTRAINT_RE, _PER_MESSAGE["constraints"], with_reason=True
            ):
                lists["constraints"].add(sentence)
        elif entry.role == "ai" and text.strip():
            ai_texts.append(text)
            for sentence in _cue_sentences(
                text, DECISION_RE, _PER_MESSAGE["decisions"], with_reason=True
            ):
                lists["decisions"].add(sentence)
        elif entry.role == "tool_call":
            called = True
            name = (entry.name or "unknown_tool").replace("`", "'")
            doc.use_tool(name, 1, [distinctive_arg(text) or ""])
        elif entry.role == "tool":
            name = (entry.name or "tool").replace("`", "'")
            tool_results[name] = tool_results.get(name, 0) + 1
        if entry.role in ("tool", "ai", "unknown"):
            cue = PROSE_ERROR_RE if entry.role == "ai" else ERROR_RE
            for line in error_lines(text, cue):
                # A line naming the exception says more than a bare "1 failed".
                lists["errors"].add(line, 0 if _NAMED_ERROR_RE.search(line) else 1)
        tier = 1 if entry.role in ("tool", "unknown") else 0
        limit = _ARTIFACTS_PER_TOOL_RESULT if tier else _ARTIFACTS_PER_MESSAGE
        scanned = _head_tail(text, *_TOOL_SCAN) if tier else _scan_window(text)
        for artifact in find_artifacts(scanned, limit):
            lists["artifacts"].add(one_line(artifact, ARTIFACT_CHARS).replace("`", "'"), tier)
    if not called:
        # Only results are visible (the calls were cut off): count those instead.
        for name, count in tool_results.items():
            doc.use_tool(name, count, [])
    # The last stated plan: the newest recent assistant message that states one, without the
    # sentences already listed as decisions.
    decided = {item.text for item in lists["decisions"].ordered()}
    for text in reversed(ai_texts[-_NEXT_FROM_LAST_AI:]):
        plan = [s for s in _plan_sentences(text) if s not in decided]
        if plan:
            for sentence in plan[: _PER_MESSAGE["next"]]:
                lists["next"].add(sentence)
            break
    doc.language = detect_language("\n".join(e.content for e in humans)) or detect_language(
        "\n".join(ai_texts)
    )
    return doc
