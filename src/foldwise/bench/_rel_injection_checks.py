"""What every model request must satisfy, whatever untrusted text it carries (pure checks).

`check_request` looks at one request as the model received it:

- **system**: every system message is trusted text only: the agent's system prompt, the
  durable authority contract (alone or appended to the prompt) or a known constant prompt
  (the memory extractor's instructions). Nothing else, so 0 untrusted bytes.
- **framing**: every data message (`<durable_context_data>` ... `</durable_context_data>`)
  parses: one open tag first, one close tag last, only runtime section tags at column 0,
  sections balanced and not nested, every value line indented, no raw `<` or `>` in a value,
  no look-alike bracket and no zero-width or bidi control anywhere in the block; and no payload
  that carries a tag character appears raw in it.
- **summarizer prompts** (`<new_messages>`): the prompt's own data tags appear once each and
  no payload with `<` or `>` appears raw in it.

`delivered` tells which payloads reached which section of a data block (escaped): coverage.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, SystemMessage

from foldwise.bench._reliability import Finding
from foldwise.durable import (
    DATA_CLOSE,
    DATA_OPEN,
    INVISIBLE_CONTROLS,
    LOOKALIKE_BRACKETS,
    escape_data,
)
from foldwise.messages import DURABLE_DATA_FLAG

__all__ = [
    "RequestView",
    "check_request",
    "delivered",
    "fragment",
    "parse_data_block",
    "view_of",
]

_SECTION_OPEN = re.compile(r'<section channel="[A-Za-z0-9_.:-]{1,64}">')
_FORBIDDEN = set(LOOKALIKE_BRACKETS + INVISIBLE_CONTROLS)
_SUMMARIZER_TAGS = ("<new_messages>", "</new_messages>")


@dataclass(frozen=True)
class RequestView:
    """A request reduced to what the checks need.

    Attributes:
        systems: The text of every system message.
        data: The text of every data message (flagged, or starting with the open tag).
        others: The text of every other message.
        flagged_mismatch: Data messages not flagged as such, or flagged ones that are not data.
    """

    systems: list[str]
    data: list[str]
    others: list[str]
    flagged_mismatch: int = 0


def view_of(messages: Sequence[BaseMessage]) -> RequestView:
    """Split LangChain request messages into system, data and other texts."""
    systems: list[str] = []
    data: list[str] = []
    others: list[str] = []
    mismatch = 0
    for message in messages:
        text = message.text if isinstance(message.content, list) else str(message.content)
        if isinstance(message, SystemMessage):
            systems.append(text)
            continue
        flagged = bool(message.additional_kwargs.get(DURABLE_DATA_FLAG))
        looks = text.startswith(DATA_OPEN)
        if flagged != looks:
            mismatch += 1
        (data if flagged or looks else others).append(text)
    return RequestView(systems, data, others, mismatch)


def parse_data_block(block: str) -> list[str]:
    """Every framing problem of one data message (an empty list when it parses)."""
    problems: list[str] = []
    lines = block.split("\n")
    if len(lines) < 2 or lines[0] != DATA_OPEN or lines[-1] != DATA_CLOSE:
        problems.append("the block does not start with the open tag and end with the close tag")
    if block.count(DATA_OPEN) != 1 or block.count(DATA_CLOSE) != 1:
        problems.append(
            f"{block.count(DATA_OPEN)} open and {block.count(DATA_CLOSE)} close tags (want 1 each)"
        )
    bad = sorted({f"U+{ord(ch):04X}" for ch in block if ch in _FORBIDDEN})
    if bad:
        problems.append(f"raw look-alike or invisible characters in the block: {', '.join(bad)}")
    inside = False
    for number, line in enumerate(lines[1:-1], start=2):
        if _SECTION_OPEN.fullmatch(line):
            if inside:
                problems.append(f"line {number}: a section opens inside a section")
            inside = True
        elif line == "</section>":
            if not inside:
                problems.append(f"line {number}: a section closes outside a section")
            inside = False
        elif not line:
            continue
        elif not inside:
            problems.append(f"line {number}: text outside any section: {line[:60]!r}")
        elif not line.startswith("  "):
            problems.append(f"line {number}: a value line at column 0: {line[:60]!r}")
        elif "<" in line or ">" in line:
            problems.append(f"line {number}: a raw tag character in a value: {line[:60]!r}")
    if inside:
        problems.append("a section is never closed")
    return problems


def fragment(text: str) -> str:
    """The escaped, whitespace-collapsed head of a payload, as a data block would carry it."""
    return " ".join(escape_data(text).split())[:40]


def delivered(view: RequestView, payloads: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """Channel -> ids of the `(id, text)` payloads whose escaped head its section carries."""
    pairs = [(pid, frag) for pid, text in payloads if (frag := fragment(text))]
    found: dict[str, set[str]] = {}
    for block in view.data:
        for channel, body in _sections(block):
            joined = " ".join(body.split())
            hits = {pid for pid, frag in pairs if frag in joined}
            if hits:
                found.setdefault(channel, set()).update(hits)
    return found


def _sections(block: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    channel, lines = "", list[str]()
    for line in block.split("\n"):
        if _SECTION_OPEN.fullmatch(line):
            channel, lines = line[len('<section channel="') : -2], []
        elif line == "</section>" and channel:
            found.append((channel, "\n".join(lines)))
            channel = ""
        elif channel:
            lines.append(line)
    return found


_ALL_MARKS = "<>" + LOOKALIKE_BRACKETS + INVISIBLE_CONTROLS


def _raw_hits(
    texts: Sequence[str], payloads: Sequence[tuple[str, str]], marks: str = _ALL_MARKS
) -> list[str]:
    found = []
    for pid, text in payloads:
        if not any(ch in text for ch in marks):
            continue
        if any(text in t for t in texts):
            found.append(pid)
    return found


def check_request(
    case: str,
    messages: Sequence[BaseMessage],
    payloads: Sequence[tuple[str, str]],
    *,
    trusted_systems: Iterable[str],
) -> list[Finding]:
    """Every violation in one recorded request (see the module docstring)."""
    findings: list[Finding] = []
    view = view_of(messages)
    trusted = set(trusted_systems)
    for text in view.systems:
        if text not in trusted:
            findings.append(
                Finding(case, "system", f"a system message holds untrusted text: {text[:80]!r}")
            )
    if view.flagged_mismatch:
        findings.append(
            Finding(case, "framing", f"{view.flagged_mismatch} message(s) pose as data blocks")
        )
    for block in view.data:
        for problem in parse_data_block(block):
            findings.append(Finding(case, "framing", problem))
        for pid in _raw_hits([block], payloads):
            findings.append(Finding(case, "framing", f"payload {pid} appears raw in a data block"))
    prompt = view.others[0] if view.others else ""
    if _SUMMARIZER_TAGS[0] in prompt:
        lines = prompt.split("\n")
        for tag in _SUMMARIZER_TAGS:
            if lines.count(tag) != 1:
                findings.append(
                    Finding(case, "framing", f"summarizer prompt has {lines.count(tag)}x {tag}")
                )
        # The summarizer prompt escapes `<`, `>` and `&` (html.escape); look-alikes and
        # invisible controls are neutralised only in the durable data block.
        for pid in _raw_hits([prompt], payloads, "<>"):
            findings.append(Finding(case, "framing", f"payload {pid} raw in a summarizer prompt"))
    return findings
