r"""Head-and-tail previews that cut where a reader (and a tokenizer) would.

A preview keeps the start and the end of a text and replaces the middle with a marker naming how
much was left out. Cuts prefer, in order: a line break near the budget edge, then a soft
boundary (whitespace, `,`, `;`, closing brackets, CJK punctuation), then any character. Whatever
the choice, a cut never lands inside a surrogate pair, before a combining mark, or inside a
backslash escape (`\n`, `\"`, `\u00e9`, or a `\ud83d\ude00` escape pair) of JSON text.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "PREVIEW_HEAD_SHARE",
    "elision_marker",
    "make_preview",
    "one_line_preview",
    "printable",
]

PREVIEW_HEAD_SHARE = 0.6
"""Share of the budget given to the head; the start of an output usually says what it is."""

_SOFT = frozenset(" \t\r,;:)]}>。，、；：！？）】」』")
_SOFT_WINDOW = 64
_LINE_WINDOW_MAX = 400
_HIGH_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_MIN_BUDGET = 80


def elision_marker(chars: int, lines: int) -> str:
    """The marker put where the middle of a text was left out."""
    line_part = f" ({lines:,} line breaks)" if lines else ""
    return f"\n[... {chars:,} characters{line_part} omitted ...]\n"


def _escape_start(text: str, pos: int) -> int | None:
    """If `pos` falls strictly inside a backslash escape, the index of its backslash."""
    for back in range(1, 6):
        j = pos - back
        if j < 0:
            break
        if text[j] != "\\":
            continue
        # The backslash only starts an escape if it is not itself escaped.
        run = 0
        k = j - 1
        while k >= 0 and text[k] == "\\":
            run += 1
            k -= 1
        if run % 2:
            continue
        length = 6 if text[j + 1 : j + 2] == "u" else 2
        if j + length > pos:
            return j
        return None
    return None


def _unsafe_boundary(text: str, pos: int) -> bool:
    """Whether cutting between `text[pos - 1]` and `text[pos]` would split something."""
    if pos <= 0 or pos >= len(text):
        return False
    before, after = text[pos - 1], text[pos]
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True
    if unicodedata.combining(after) or after in "\u200d\ufe0e\ufe0f" or before == "\u200d":
        return True
    if _escape_start(text, pos) is not None:
        return True
    return bool(_HIGH_ESCAPE.fullmatch(text, pos - 6, pos) and _LOW_ESCAPE.match(text, pos))


def _safe_head_end(text: str, pos: int) -> int:
    """Move a head cut left until it splits nothing."""
    while pos > 0 and _unsafe_boundary(text, pos):
        start = _escape_start(text, pos)
        if start is not None and start < pos:
            pos = start
        elif _HIGH_ESCAPE.fullmatch(text, max(0, pos - 6), pos):
            pos -= 6
        else:
            pos -= 1
    return pos


def _safe_tail_start(text: str, pos: int) -> int:
    """Move a tail cut right until it splits nothing."""
    while pos < len(text) and _unsafe_boundary(text, pos):
        start = _escape_start(text, pos)
        if start is not None:
            pos = start + (6 if text[start + 1 : start + 2] == "u" else 2)
        elif _HIGH_ESCAPE.fullmatch(text, max(0, pos - 6), pos):
            pos += 6
        else:
            pos += 1
    return pos


def _head_end(text: str, budget: int) -> int:
    window = min(_LINE_WINDOW_MAX, max(1, budget // 5))
    newline = text.rfind("\n", max(0, budget - window), budget + 1)
    if newline > 0:
        return newline
    for pos in range(budget, max(0, budget - _SOFT_WINDOW), -1):
        if text[pos - 1] in _SOFT:
            return _safe_head_end(text, pos)
    return _safe_head_end(text, budget)


def _tail_start(text: str, start: int) -> int:
    window = min(_LINE_WINDOW_MAX, max(1, (len(text) - start) // 5))
    newline = text.find("\n", max(0, start - 1), start + window)
    if newline >= 0:
        return newline + 1
    for pos in range(start, min(len(text), start + _SOFT_WINDOW)):
        if text[pos - 1] in _SOFT:
            return _safe_tail_start(text, pos)
    return _safe_tail_start(text, start)


def make_preview(text: str, *, max_chars: int) -> str:
    """Return `text` if it fits in `max_chars`, else its head and tail around a marker.

    The result is never longer than `max_chars`. The marker says how many characters and line
    breaks were left out, e.g. `[... 192,345 characters (3,210 line breaks) omitted ...]`.

    Args:
        text: Any text (prose, code, JSON, CJK, ...).
        max_chars: Size bound of the preview, marker included; at least 80.

    Raises:
        ValueError: `max_chars` is below 80.
    """
    if max_chars < _MIN_BUDGET:
        raise ValueError(f"max_chars must be at least {_MIN_BUDGET}, got {max_chars}")
    if len(text) <= max_chars:
        return text
    # Numbers in the real marker are at most len(text), so this bounds its length.
    budget = max_chars - len(elision_marker(len(text), len(text)))
    head_budget = int(budget * PREVIEW_HEAD_SHARE)
    head_end = _head_end(text, head_budget)
    tail_start = _tail_start(text, len(text) - (budget - head_budget))
    tail_start = max(tail_start, head_end)
    omitted = tail_start - head_end
    marker = elision_marker(omitted, text.count("\n", head_end, tail_start))
    return text[:head_end] + marker + text[tail_start:]


def printable(text: str) -> str:
    """`text` with control characters, NUL and unpaired surrogates replaced by spaces."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else " " for ch in text)


def one_line_preview(text: str, *, max_chars: int = 120) -> str:
    """The first non-blank line of `text`, printable, whitespace collapsed, at most `max_chars`."""
    line = ""
    for candidate in text[: max_chars * 20].splitlines():
        if candidate.strip():
            line = " ".join(printable(candidate).split())
            break
    if len(line) > max_chars:
        line = line[: _safe_head_end(line, max_chars - 1)] + "…"
    return line
