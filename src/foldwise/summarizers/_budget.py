"""Fit a `SummaryDoc` into a token budget and render it.

The two verbatim sections get a bounded head each (a fifth and a seventh of the budget). List
items are then taken round-robin across sections in priority order (constraints, two per round,
then decisions, errors, next steps, artifacts, tool calls), each section offering its preferred
item first: the newest, and for artifacts and errors the better tier first (artifacts seen
outside tool output, error lines naming an exception).
Chosen items are shown in first-seen order. The rendered text is counted once more and the
last-chosen items are dropped until it fits, because per-item costs are estimates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from foldwise.summarizers._document import Selection, render_selection, render_tool_line
from foldwise.summarizers._extract import SummaryDoc
from foldwise.summarizers._languages import SummaryLanguage

__all__ = ["fit_summary"]

Counter = Callable[[str], int]

_PRIORITY = ("constraints", "decisions", "errors", "next", "artifacts", "tools")
_MAX_ITEMS = {
    "constraints": 12,
    "decisions": 12,
    "errors": 10,
    "next": 8,
    "artifacts": 25,
    "tools": 12,
}
_SHARES = {"constraints": 2}
"""Items a section may take per round; user constraints matter most after the intent."""
_MAX_MISSES = 3
_SCALES = (1.0, 0.5, 0.25, 0.0)
_MIN_VERBATIM_TOKENS = 6


@dataclass(frozen=True)
class _Candidate:
    display: int
    text: str


def _candidates(doc: SummaryDoc) -> dict[str, list[_Candidate]]:
    """Per section, candidates in preference order."""
    out: dict[str, list[_Candidate]] = {}
    for key, items in doc.lists.items():
        ordered = items.ordered()
        ranked = sorted(range(len(ordered)), key=lambda i: (ordered[i].tier, -ordered[i].last))
        out[key] = [_Candidate(i, ordered[i].text) for i in ranked]
    usages = list(doc.tools.values())
    ranked = sorted(range(len(usages)), key=lambda i: -usages[i].last)
    out["tools"] = [
        _Candidate(i, render_tool_line(usages[i].name, usages[i].count, usages[i].args))
        for i in ranked
    ]
    return out


def _cut(text: str, end: int) -> str:
    if end and 0xD800 <= ord(text[end - 1]) <= 0xDBFF:
        end -= 1
    return text[:end]


def _head(text: str | None, cap: int, count: Counter) -> str | None:
    """The longest head of `text` whose estimate (with a trailing `…`) is within `cap`."""
    if text is None or count(text) <= cap:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(_cut(text, middle) + "…") <= cap:
            low = middle
        else:
            high = middle - 1
    head = _cut(text, low)
    space = max(head.rfind(" "), head.rfind("\n"))
    if space >= len(head) - 30 and space > len(head) // 2:
        head = head[:space]
    head = head.rstrip()
    return head + "…" if head else None


def _truncate(text: str, budget: int, count: Counter) -> str:
    if count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(_cut(text, middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return _cut(text, max(low, 1))


def _base(
    doc: SummaryDoc, budget: int, scale: float, *, compact: bool, count: Counter
) -> Selection:
    same = doc.latest is not None and doc.latest == doc.intent
    intent_cap = max(_MIN_VERBATIM_TOKENS, int(budget * 0.20 * scale))
    latest_cap = max(_MIN_VERBATIM_TOKENS, int(budget * 0.14 * scale))
    return Selection(
        intent=_head(doc.intent, intent_cap, count),
        latest=None if same else _head(doc.latest, latest_cap, count),
        latest_same=same,
        compact=compact,
    )


def _fill(
    base: Selection,
    candidates: dict[str, list[_Candidate]],
    budget: int,
    language: SummaryLanguage,
    count: Counter,
) -> str:
    remaining = budget - count(render_selection(base, language))
    quoted = base.intent or ""
    if candidates.get("artifacts"):
        # An artifact quoted verbatim in the session intent (which every merge keeps) would
        # cost budget for nothing. The latest request is replaced at the next merge, so what
        # it quotes is still listed.
        candidates = {
            **candidates,
            "artifacts": [c for c in candidates["artifacts"] if c.text not in quoted],
        }
    chosen: dict[str, list[_Candidate]] = {key: [] for key in _PRIORITY}
    order: list[str] = []
    pointer = dict.fromkeys(_PRIORITY, 0)
    misses = dict.fromkeys(_PRIORITY, 0)
    active = [key for key in _PRIORITY if candidates.get(key)]
    while active:
        for key in list(active):
            for _ in range(_SHARES.get(key, 1)):
                pool = candidates[key]
                if (
                    pointer[key] >= len(pool)
                    or len(chosen[key]) >= _MAX_ITEMS[key]
                    or misses[key] >= _MAX_MISSES
                ):
                    active.remove(key)
                    break
                candidate = pool[pointer[key]]
                pointer[key] += 1
                cost = count(candidate.text) + 2  # bullet, newline (and backticks)
                if cost <= remaining:
                    chosen[key].append(candidate)
                    order.append(key)
                    remaining -= cost
                else:
                    misses[key] += 1

    def render() -> str:
        lists = {
            key: [c.text for c in sorted(items, key=lambda c: c.display)]
            for key, items in chosen.items()
        }
        selection = Selection(base.intent, base.latest, base.latest_same, lists, base.compact)
        return render_selection(selection, language)

    text = render()
    while order and count(text) > budget:
        chosen[order.pop()].pop()
        text = render()
    return text


def fit_summary(doc: SummaryDoc, language: SummaryLanguage, budget: int, *, count: Counter) -> str:
    """Render `doc` in `language` within `budget` tokens as measured by `count`.

    Every section is shown (an empty one says so) unless even the headings do not fit; then
    empty sections are left out, and as a last resort the text is cut.

    Args:
        doc: The content to render.
        language: Headings and fixed words.
        budget: The token ceiling (at least 1).
        count: The token estimate used for the budget.

    Returns:
        The summary markdown.
    """
    budget = max(1, budget)
    candidates = _candidates(doc)
    for compact in (False, True):
        for scale in _SCALES:
            base = _base(doc, budget, scale, compact=compact, count=count)
            if count(render_selection(base, language)) <= budget:
                text = _fill(base, candidates, budget, language, count)
                if text:
                    return text
    smallest = render_selection(
        _base(doc, budget, 0.0, compact=True, count=count), language
    ) or render_selection(_base(doc, budget, 0.0, compact=False, count=count), language)
    return _truncate(smallest, budget, count)
