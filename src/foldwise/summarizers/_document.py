"""The summary document: render the markdown sections, parse them back, merge two summaries.

The rendered form is designed to parse back unambiguously: every section starts with a
`## <heading>` line, verbatim text is quoted line by line (`> `), and list items are single
lines starting with `- `, so no quoted user text can forge a heading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from foldwise.summarizers._cues import error_tier, find_artifacts, one_line
from foldwise.summarizers._extract import (
    LIST_KEYS,
    SENTENCE_CHARS,
    VERBATIM_CHARS,
    ItemList,
    SummaryDoc,
    error_lines,
)
from foldwise.summarizers._languages import (
    SECTION_KEYS,
    SectionKey,
    SummaryLanguage,
    heading_language,
    is_none_marker,
    is_same_marker,
    section_for_heading,
)

__all__ = [
    "Selection",
    "merge_docs",
    "parse_summary",
    "render_selection",
    "render_tool_line",
]

_HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:\d{1,2}[.)]\s*)?"
    r"(?P<title>[^\s:：*#>`\-][^:：*#`\n]{0,60}?)\s*(?:\*\*|__)?\s*"
    r"(?:[:：]\s*(?:\*\*|__)?\s*(?P<rest>.*))?$"
)
_ELISION_RE = re.compile(r"^\s*\[… [\d,]+ (?:characters elided|earlier messages omitted) …\]\s*$")
_BULLET_RE = re.compile(r"^\s*(?:[-*•+]\s+|\d{1,3}[.)]\s+)")
_TOOL_RE = re.compile(r"^`(?P<name>[^`]+)` ×(?P<count>\d+)(?::\s*(?P<args>.*))?$")
_TICK_RE = re.compile(r"`([^`]*)`")
_ARTIFACT_LIMIT = 40


@dataclass
class Selection:
    """What one rendering shows: verbatim texts and the chosen item lines, in display order.

    Attributes:
        intent: The session intent text, or `None`.
        latest: The latest request text, or `None`.
        latest_same: Render the latest request as "same as the session intent".
        lists: Item texts per list section (tool lines under `tools`).
        compact: Leave out empty sections (used only when even the skeleton is over budget).
    """

    intent: str | None = None
    latest: str | None = None
    latest_same: bool = False
    lists: dict[str, list[str]] = field(default_factory=dict)
    compact: bool = False


def render_tool_line(name: str, count: int, args: Sequence[str]) -> str:
    """One `Tool calls made` item (without its `- ` bullet)."""
    if count <= 0:
        return name
    line = f"`{name}` ×{count}"
    if args:
        line += ": " + ", ".join(f"`{arg}`" for arg in args)
    return line


def _quote(text: str) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in text.split("\n")]


def render_selection(selection: Selection, language: SummaryLanguage) -> str:
    """Render a selection as markdown sections in `language`."""
    blocks: list[str] = []
    for key in SECTION_KEYS:
        body: list[str]
        if key == "intent" and selection.intent:
            body = _quote(selection.intent)
        elif key == "latest" and selection.latest_same:
            body = [language.same_as_intent]
        elif key == "latest" and selection.latest:
            body = _quote(selection.latest)
        elif key not in ("intent", "latest") and selection.lists.get(key):
            items = selection.lists[key]
            if key == "artifacts":
                body = [f"- `{item}`" for item in items]
            else:
                body = [f"- {item}" for item in items]
        elif selection.compact:
            continue
        else:
            body = [language.none]
        blocks.append("\n".join([f"## {language.headings[key]}", *body]))
    return "\n\n".join(blocks)


def _unquote(lines: list[str]) -> str | None:
    out: list[str] = []
    for line in lines:
        if line.startswith("> "):
            out.append(line[2:])
        elif line.startswith(">"):
            out.append(line[1:])
        else:
            out.append(line)
    text = "\n".join(out).strip()
    if not text or is_none_marker(text):
        return None
    return text


def _list_items(lines: list[str]) -> list[str]:
    items: list[str] = []
    for line in lines:
        text = one_line(_BULLET_RE.sub("", line), SENTENCE_CHARS)
        if text and not is_none_marker(text):
            items.append(text)
    return items


def _split_sections(text: str) -> tuple[dict[SectionKey, list[str]], list[str], str | None]:
    sections: dict[SectionKey, list[str]] = {}
    preamble: list[str] = []
    language: str | None = None
    current: SectionKey | None = None
    after_elision = False
    for line in text.split("\n"):
        if _ELISION_RE.match(line):
            after_elision = True
            continue
        partial = after_elision and not line.startswith(("- ", "> ", "#"))
        after_elision = False
        if partial:
            continue  # the tail of a line cut by the compaction engine's elision
        heading = None if line.startswith(("- ", "> ")) else _HEADING_RE.match(line)
        key = section_for_heading(heading.group("title")) if heading else None
        if heading is not None and key is not None:
            current = key
            language = language or heading_language(heading.group("title"))
            body = sections.setdefault(key, [])
            rest = (heading.group("rest") or "").strip()
            if rest:
                body.append(rest)
        elif current is None:
            preamble.append(line)
        else:
            sections[current].append(line.rstrip())
    return sections, preamble, language


def parse_summary(text: str) -> SummaryDoc:
    """Parse a previous summary into sections.

    foldwise's own headings in any language are recognised, and so are the headings other
    summarizers commonly write (`SESSION INTENT`, `SUMMARY`, `NEXT STEPS`, ...). A summary with
    no recognisable heading keeps its opening paragraph as the session intent and contributes
    its paths, URLs, identifiers and error lines to the lists; its text is never re-summarized.

    Args:
        text: The previous summary (possibly cut in the middle by the compaction engine).

    Returns:
        The parsed document; every item has tier 0 (it already survived a selection), except
        error lines, which are ranked again by `error_tier`.
    """
    doc = SummaryDoc()
    sections, preamble, doc.language = _split_sections(text)
    if not sections:
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        if paragraphs:
            doc.intent = paragraphs[0][:VERBATIM_CHARS]
        for artifact in find_artifacts(text, _ARTIFACT_LIMIT):
            doc.lists["artifacts"].add(artifact.replace("`", "'"))
        for line, tier in error_lines(text):
            doc.lists["errors"].add(line, tier)
        return doc
    del preamble  # text before the first heading is a title or chatter; nothing to keep
    doc.intent = _unquote(sections.get("intent", []))
    latest_lines = sections.get("latest", [])
    latest = _unquote(latest_lines)
    doc.latest = doc.intent if latest is not None and is_same_marker(latest) else latest
    for key in LIST_KEYS:
        for item in _list_items(sections.get(key, [])):
            if key == "artifacts" and len(item) > 1 and item[0] == "`" and item[-1] == "`":
                item = item[1:-1]
            # An error line keeps its rank across merges, so prose that mentions an error
            # never outranks a real error report just because it survived a selection.
            doc.lists[key].add(item, error_tier(item) if key == "errors" else 0)
    for item in _list_items(sections.get("tools", [])):
        match = _TOOL_RE.match(item)
        if match is None:
            doc.use_tool(item, 0, [])
        else:
            args = _TICK_RE.findall(match.group("args") or "")
            doc.use_tool(match.group("name"), int(match.group("count")), args)
    return doc


def merge_docs(old: SummaryDoc, new: SummaryDoc) -> SummaryDoc:
    """Merge a previous summary with the content of the new messages, section by section.

    The earliest session intent is kept; the latest request and the plan are replaced when the
    new messages state one; lists are unions in which new sightings are the most recent (they
    win when the budget bites); tool counts add up.

    Args:
        old: The parsed previous summary.
        new: What was extracted from the new messages.

    Returns:
        A new document.
    """
    merged = SummaryDoc(
        intent=old.intent or new.intent,
        latest=new.latest or old.latest,
        language=new.language or old.language,
    )
    for key in LIST_KEYS:
        if key == "next":
            merged.lists[key] = ItemList()
            merged.lists[key].extend(new.lists[key] if len(new.lists[key]) else old.lists[key])
            continue
        merged.lists[key].extend(old.lists[key])
        merged.lists[key].extend(new.lists[key])
    for source in (old, new):
        base = merged.tool_clock
        for usage in source.tools.values():
            merged.use_tool(usage.name, usage.count, usage.args, last=base + usage.last)
    return merged
