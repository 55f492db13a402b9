"""Shrink any markdown summary to a budget while keeping every section heading.

Used when a model's summary comes back over its size target (and a re-ask did not fix it) and
to bound a stored summary for rendering. Cutting the middle of a summary drops whole sections
(a 7.8k-character six-section summary lost `## Artifacts` that way), so instead:

1. Every line under a heading is an item. All items are clipped to one shared ceiling (the
   "water level": short items stay whole, long ones lose their end), lowered until the text fits.
2. When even short items do not fit, each section keeps only its first items, with a marker
   saying how many were left out; every section keeps at least its first item while it can.
3. Then headings alone; only if the headings themselves do not fit is the text cut, at its end.

The result never has a cut in its middle and is measured with the caller's `count`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["condense_summary"]

Counter = Callable[[str], int]

_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s")
_MIN_ITEM_CHARS = 48
_ELLIPSIS = "…"
_SHRINK = 0.85
_ROUNDS = 8


@dataclass(frozen=True)
class _Section:
    heading: str | None
    items: tuple[str, ...]


def _parse(text: str) -> list[_Section]:
    sections: list[_Section] = []
    heading: str | None = None
    items: list[str] = []
    for line in text.splitlines():
        if _HEADING_RE.match(line):
            if heading is not None or items:
                sections.append(_Section(heading, tuple(items)))
            heading, items = line.rstrip(), []
        elif line.strip():
            items.append(line.rstrip())
    if heading is not None or items:
        sections.append(_Section(heading, tuple(items)))
    return sections


def _clip(item: str, cap: int) -> str:
    if len(item) <= cap:
        return item
    head = item[: max(1, cap - 1)].rstrip()
    # Never leave half of a surrogate pair at the cut.
    if head and 0xD800 <= ord(head[-1]) <= 0xDBFF:
        head = head[:-1]
    return head + _ELLIPSIS


def _render(
    sections: Sequence[_Section], cap: int, keep: int | None = None, *, markers: bool = True
) -> str:
    blocks: list[str] = []
    for section in sections:
        lines = [section.heading] if section.heading is not None else []
        items = section.items if keep is None else section.items[:keep]
        lines += [_clip(item, cap) for item in items]
        left_out = len(section.items) - len(items)
        if left_out and markers:
            lines.append(f"- {_ELLIPSIS} {left_out} more item{'s' if left_out > 1 else ''}")
        blocks.append("\n".join(lines))
    return "\n\n".join(block for block in blocks if block)


def _water_level(lengths: Sequence[int], target: int) -> int:
    """Largest per-item cap `c` such that `sum(min(length, c)) <= target`."""
    remaining = target
    ordered = sorted(lengths)
    for index, length in enumerate(ordered):
        share = remaining // (len(ordered) - index)
        if length > share:
            return max(0, share)
        remaining -= length
    return ordered[-1] if ordered else 0


def _by_ceiling(sections: Sequence[_Section], text: str, budget: int, count: Counter) -> str | None:
    """Step 1: clip every item to a shared ceiling, lowered until the text fits."""
    lengths = [len(item) for s in sections for item in s.items]
    fixed = len(_render(sections, 0, keep=0, markers=False))
    chars = int(len(text) * budget / max(1, count(text)))
    for _ in range(_ROUNDS):
        cap = _water_level(lengths, max(0, chars - fixed - len(lengths)))
        if cap < _MIN_ITEM_CHARS:
            return None
        candidate = _render(sections, cap)
        if count(candidate) <= budget:
            return candidate
        chars = int(chars * _SHRINK)
    return None


def _by_item_count(sections: Sequence[_Section], budget: int, count: Counter) -> str | None:
    """Step 2: short items, and only the first `keep` of each section (binary search)."""
    low, high = 0, max((len(s.items) for s in sections), default=0)
    best: str | None = None
    while low <= high:
        keep = (low + high) // 2
        candidate = _render(sections, _MIN_ITEM_CHARS, keep=keep)
        if count(candidate) <= budget:
            best, low = candidate, keep + 1
        else:
            high = keep - 1
    return best


def _cut_end(text: str, budget: int, count: Counter) -> str:
    """Step 3: the last resort, the end of the text goes."""
    size = count(text)
    chars = int(len(text) * budget / max(1, size))
    while chars > 0:
        candidate = _clip(text, chars)
        if count(candidate) <= budget:
            return candidate
        chars = int(chars * _SHRINK)
    return ""


def condense_summary(text: str, budget: int, *, count: Counter) -> str:
    """Return `text` within `budget` (as measured by `count`), every section heading kept.

    Args:
        text: A markdown summary (`#` headings, one item per line); other text works too.
        budget: The ceiling, in the unit of `count` (pass `len` for characters).
        count: Measures a text.

    Returns:
        `text` stripped when it already fits, otherwise a shortened version that keeps every
        heading and the start of every section while it can; never cut in the middle.
    """
    text = text.strip()
    budget = max(1, budget)
    if count(text) <= budget:
        return text
    sections = _parse(text)
    result = _by_ceiling(sections, text, budget, count)
    if result is None:
        result = _by_item_count(sections, budget, count)
    if result is not None:
        return result
    return _cut_end(_render(sections, 0, keep=0, markers=False), budget, count)
