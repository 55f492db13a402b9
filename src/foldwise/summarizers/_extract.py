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

from foldwise.compaction._prompt_transcript import TranscriptEntry
from foldwise.summarizers._cues import (
    CONSTRAINT_RE,
    DECISION_RE,
    ERROR_RE,
    NEXT_RE,
    PROSE_ERROR_RE,
    REASON_START_RE,
    STRONG_PLAN_RE,
    error_tier,
    find_artifacts,
    may_state_plan,
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
ERROR_CHARS = 200
ARTIFACT_CHARS = 200
ARG_CHARS = 80
ARGS_PER_TOOL = 3
_SCAN_CHARS = 200_000  # sentence cues are looked for in a message's head and tail only
_TOOL_SCAN = (32_000, 8_000)  # artifacts in tool output: its head and tail only
_PER_MESSAGE = {"constraints": 6, "decisions": 6, "next": 8}
_ARTIFACTS_PER_MESSAGE = 30
_ARTIFACTS_PER_TOOL_RESULT = 12
_ERRORS_PER_MESSAGE = 4  # the first and the last three of the best tier, then lower tiers
_PROSE_ERRORS_PER_MESSAGE = 1
_NEXT_FROM_LAST_AI = 3  # a passing "I'll …" counts as the plan only in the newest messages
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
_PLAN_ITEM_RE = re.compile(r"(?:[-*•+]|\d{1,3}[.)])\s+")
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


def _clip_error(line: str, cue_at: int) -> str:
    """Keep the head of a long error line, unless the cue itself lies beyond the cut."""
    if len(line) <= ERROR_CHARS:
        return one_line(line, ERROR_CHARS)
    if cue_at > ERROR_CHARS * 2 // 3:
        left = cue_at - ERROR_CHARS // 3
        return "…" + one_line(line[left:], ERROR_CHARS - 1)
    return one_line(line, ERROR_CHARS)


def _pick(lines: list[tuple[int, str, int]], slots: int) -> list[tuple[int, str, int]]:
    """The first and the last `slots - 1` of `lines`, or all of them when they fit."""
    if len(lines) <= slots:
        return lines
    if slots <= 1:
        return lines[:slots]
    return lines[:1] + lines[-(slots - 1) :]


def error_lines(
    text: str, cue: re.Pattern[str] = ERROR_RE, *, prose: bool = False
) -> list[tuple[str, int]]:
    """Lines of one message carrying an error cue, each with its `error_tier`, in text order.

    At most four lines are kept per message, best tier first: real error reports (an
    exception with its message, `ERROR`, `FAILED`, `错误：`) before plain mentions, and those
    before prose that merely talks about errors (at most one such line). Within a tier the
    first line and the last three are kept. Each line is clipped to `ERROR_CHARS`, head kept.

    Args:
        text: The message content.
        cue: What makes a line an error line.
        prose: The message is the assistant's own text (see `error_tier`).
    """
    found: list[tuple[int, str, int]] = []
    position = 0
    while True:
        match = cue.search(text, position)
        if match is None:
            break
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        position = end + 1
        raw = text[start:end]
        line = raw.strip()
        if not line or line == _TRACEBACK_HEADER:
            continue
        cue_at = match.start() - start - (len(raw) - len(raw.lstrip()))
        shown = _clip_error(line, cue_at)
        found.append((len(found), shown, error_tier(shown, prose=prose)))
    chosen: list[tuple[int, str, int]] = []
    for tier in sorted({tier for _, _, tier in found}):
        slots = _ERRORS_PER_MESSAGE - len(chosen)
        if tier == 2:
            slots = min(slots, _PROSE_ERRORS_PER_MESSAGE)
        if slots <= 0:
            break
        chosen.extend(_pick([f for f in found if f[2] == tier], slots))
    return [(line, tier) for _, line, tier in sorted(chosen)]


def _plan_sentences(text: str) -> list[tuple[str, bool]]:
    """Sentences stating a plan, with the list items under a plan line ending with a colon.

    Each comes with whether it states the plan explicitly (`STRONG_PLAN_RE`); items under an
    explicit plan line are explicit too, and such a bare heading line is left out.
    """
    out: list[tuple[str, bool]] = []
    under: bool | None = None  # inside the list under a plan line: whether that line is explicit
    heading = -1
    for raw in _scan_window(text).split("\n"):
        line = raw.strip()
        if not line:
            continue
        if under is not None and _PLAN_ITEM_RE.match(line):
            if heading >= 0:
                del out[heading]  # "Next steps:" says nothing the items do not
                heading = -1
            out.extend((s, under) for s in split_sentences(line)[:1])
            continue
        under, heading = None, -1
        for sentence in split_sentences(line):
            if NEXT_RE.search(sentence) or STRONG_PLAN_RE.search(sentence):
                out.append((sentence, STRONG_PLAN_RE.search(sentence) is not None))
        if line.endswith((":", "：")) and (NEXT_RE.search(line) or STRONG_PLAN_RE.search(line)):
            under = STRONG_PLAN_RE.search(line) is not None
            heading = len(out) - 1 if len(line) <= 40 and out and out[-1][0] == line else -1
    return [(one_line(s, SENTENCE_CHARS), strong) for s, strong in out]


def _newest_plan(ai_texts: Sequence[str], decided: set[str]) -> list[tuple[str, int]]:
    """The last stated plan of a span, oldest sentence first, each with its tier.

    The newest of the last few assistant messages that states any plan gives tier-1
    sentences (a passing "I'll …"); its explicit plan sentences ("Next step: …") are tier 0.
    When it states no explicit plan, the newest explicit plan of the whole span is added
    before it, because an explicit plan stays current until a newer one replaces it.
    """
    limit = _PER_MESSAGE["next"]
    recent: list[tuple[str, bool]] = []
    recent_index = len(ai_texts)
    for index in range(len(ai_texts) - 1, max(-1, len(ai_texts) - 1 - _NEXT_FROM_LAST_AI), -1):
        recent = [(s, strong) for s, strong in _plan_sentences(ai_texts[index]) if s not in decided]
        if recent:
            recent_index = index
            break
    recent = recent[:limit]
    explicit: list[tuple[str, bool]] = []
    if not any(strong for _, strong in recent):
        for index in range(recent_index - 1, -1, -1):
            if not may_state_plan(_scan_window(ai_texts[index])):
                continue  # most messages state no plan: skip them without a regex
            plan = _plan_sentences(ai_texts[index])
            explicit = [(s, True) for s, strong in plan if strong and s not in decided]
            if explicit:
                break
    chosen = explicit[: max(1, limit - len(recent))] + recent
    return [(sentence, 0 if strong else 1) for sentence, strong in chosen]


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
            prose = entry.role == "ai"
            for line, error_rank in error_lines(
                text, PROSE_ERROR_RE if prose else ERROR_RE, prose=prose
            ):
                lists["errors"].add(line, error_rank)
        tier = 1 if entry.role in ("tool", "unknown") else 0
        limit = _ARTIFACTS_PER_TOOL_RESULT if tier else _ARTIFACTS_PER_MESSAGE
        scanned = _head_tail(text, *_TOOL_SCAN) if tier else _scan_window(text)
        for artifact in find_artifacts(scanned, limit):
            lists["artifacts"].add(one_line(artifact, ARTIFACT_CHARS).replace("`", "'"), tier)
    if not called:
        # Only results are visible (the calls were cut off): count those instead.
        for name, count in tool_results.items():
            doc.use_tool(name, count, [])
    decided = {item.text for item in lists["decisions"].ordered()}
    for sentence, plan_rank in _newest_plan(ai_texts, decided):
        lists["next"].add(sentence, plan_rank)
    doc.language = detect_language("\n".join(e.content for e in humans)) or detect_language(
        "\n".join(ai_texts)
    )
    return doc
