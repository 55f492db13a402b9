"""Fit a `SummaryDoc` into a token budget and render it.

The two verbatim sections get a bounded head each (a fifth and a seventh of the budget). What
is left goes to the list sections in two passes:

1. Each section gets its own share of it (`_SHARES`) and fills it with its preferred items:
   the newest first, and the better tier first (artifacts seen outside tool output, error
   lines that are real error reports, explicit plans). No section can starve another.
2. Whatever the sections did not use is shared out round-robin in priority order
   (constraints, two per round, then decisions, errors, next steps, artifacts, tool calls).

Sentences and error lines are clipped to a per-item ceiling (head kept), and an item already
shown in another section is not repeated. An artifact is left out when the session intent or a
chosen constraint, decision or error line already quotes it: those sections survive every merge
(the intent is kept, the lists are unions), while the latest request, the plan and the tool
lines are replaced and would take the artifact with them. Chosen items are shown in first-seen
order. The rendered text is counted once more and the last-chosen items are dropped until it
fits, because per-item costs are estimates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from foldwise.summarizers._document import Selection, render_selection, render_tool_line
from foldwise.summarizers._extract import SummaryDoc
from foldwise.summarizers._languages import SummaryLanguage

__all__ = ["fit_summary"]

Counter = Callable[[str], int]

_PRIORITY = ("constraints", "decisions", "errors", "next", "artifacts", "tools")
_FIRST_PASS = ("constraints", "decisions", "errors", "next", "tools", "artifacts")
"""Artifacts come last so that those another section already quotes are skipped."""
_QUOTING = frozenset({"constraints", "decisions", "errors"})
"""Sections whose items survive merges, so an artifact they quote need not be listed."""
_SHARES = {
    "constraints": 0.22,
    "decisions": 0.18,
    "errors": 0.18,
    "next": 0.08,
    "tools": 0.12,
    "artifacts": 0.22,
}
"""Each list section's own share of the list budget (first pass)."""
_MAX_ITEMS = {
    "constraints": 12,
    "decisions": 12,
    "errors": 12,
    "next": 8,
    "artifacts": 30,
    "tools": 12,
}
_ROUND_SHARES = {"constraints": 2}
"""Items a section may take per round of the second pass; user constraints matter most."""
_ITEM_TOKENS = {"constraints": 120, "decisions": 90, "errors": 50, "next": 90}
"""Per-item ceilings (head kept); artifacts and tool lines are never cut."""
_MIN_ITEM_TOKENS = 12
_MAX_MISSES = 3
_SCALES = (1.0, 0.5, 0.25, 0.0)
_MIN_VERBATIM_TOKENS = 6
_SPACE_RE = re.compile(r"\s+")


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


def _same(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip().casefold()


def _glued(char: str, extra: str) -> bool:
    return char.isascii() and (char.isalnum() or char in extra)


def _mentions(text: str, token: str) -> bool:
    """Whether `text` quotes `token` whole: `a.py` in "see a.py." but not in "data.py"."""
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not _glued(before, "_/.-") and not _glued(after, "_/-"):
            return True
        start = text.find(token, start + 1)
    return False


@dataclass
class _Filler:
    """The state of one fill: what is chosen, in which order, and what is left to offer."""

    candidates: dict[str, list[_Candidate]]
    count: Counter
    remaining: int
    item_cap: int
    quoted: str
    chosen: dict[str, list[_Candidate]] = field(default_factory=dict)
    order: list[tuple[str, _Candidate]] = field(default_factory=list)
    pointer: dict[str, int] = field(default_factory=dict)
    misses: dict[str, int] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)

    def peek(self, key: str) -> tuple[_Candidate, int] | None:
        """The section's next candidate as it would be shown, with its cost; `None` when done."""
        pool = self.candidates.get(key, [])
        while self.pointer.get(key, 0) < len(pool):
            if len(self.chosen.get(key, [])) >= _MAX_ITEMS[key]:
                return None
            candidate = pool[self.pointer.get(key, 0)]
            shown = self._prepare(key, candidate)
            if shown is not None:
                return shown, self.count(_line(key, shown.text)) + 1  # and its newline
            self.pointer[key] = self.pointer.get(key, 0) + 1  # redundant: skip for free
        return None

    def _prepare(self, key: str, candidate: _Candidate) -> _Candidate | None:
        if key == "artifacts":
            return None if _mentions(self.quoted, candidate.text) else candidate
        if _same(candidate.text) in self.shown:
            return None
        cap = _ITEM_TOKENS.get(key)
        if cap is None:
            return candidate
        text = _head(candidate.text, min(cap, self.item_cap), self.count)
        return _Candidate(candidate.display, text) if text else None

    def take(self, key: str, candidate: _Candidate, cost: int) -> None:
        """Choose `candidate`, the section's next one as `peek` showed it."""
        original = self.candidates[key][self.pointer.get(key, 0)]
        self.pointer[key] = self.pointer.get(key, 0) + 1
        self.chosen.setdefault(key, []).append(candidate)
        self.order.append((key, candidate))
        self.remaining -= cost
        if key != "artifacts":
            self.shown.add(_same(original.text))  # before clipping: caps differ per section
        if key in _QUOTING:
            self.quoted += "\n" + candidate.text

    def skip(self, key: str) -> None:
        """Pass over the section's next candidate: it does not fit."""
        self.pointer[key] = self.pointer.get(key, 0) + 1
        self.misses[key] = self.misses.get(key, 0) + 1


def _line(key: str, text: str) -> str:
    return f"- `{text}`" if key == "artifacts" else f"- {text}"


def _fill(
    base: Selection,
    candidates: dict[str, list[_Candidate]],
    budget: int,
    language: SummaryLanguage,
    count: Counter,
) -> str:
    lists_budget = budget - count(render_selection(base, language))
    # An artifact quoted verbatim in the session intent (which every merge keeps) costs budget
    # for nothing. The latest request is replaced at the next merge, so what it quotes stays.
    filler = _Filler(
        candidates,
        count,
        remaining=lists_budget,
        item_cap=max(_MIN_ITEM_TOKENS, lists_budget // 4),
        quoted=base.intent or "",
    )
    for key in _FIRST_PASS:
        quota = int(max(0, lists_budget) * _SHARES[key])
        while (offer := filler.peek(key)) is not None:
            candidate, cost = offer
            if cost > quota or cost > filler.remaining:
                break
            filler.take(key, candidate, cost)
            quota -= cost
    active = list(_PRIORITY)
    while active:
        for key in list(active):
            for _ in range(_ROUND_SHARES.get(key, 1)):
                offer = filler.peek(key)
                if offer is None or filler.misses.get(key, 0) >= _MAX_MISSES:
                    active.remove(key)
                    break
                candidate, cost = offer
                if cost <= filler.remaining:
                    filler.take(key, candidate, cost)
                else:
                    filler.skip(key)
    # Items chosen in the second pass may quote an artifact chosen before them.
    order = [
        (key, c)
        for key, c in filler.order
        if key != "artifacts" or not _mentions(filler.quoted, c.text)
    ]

    def render() -> str:
        lists: dict[str, list[str]] = {key: [] for key in _PRIORITY}
        for key, candidate in sorted(order, key=lambda pair: pair[1].display):
            lists[key].append(candidate.text)
        selection = Selection(base.intent, base.latest, base.latest_same, lists, base.compact)
        return render_selection(selection, language)

    text = render()
    while order and count(text) > budget:
        order.pop()
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
