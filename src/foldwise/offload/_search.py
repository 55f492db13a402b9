r"""Searching the rows of a stored text: plain substrings in process, regexes in a worker.

Python's `re` backtracks, and a short pattern such as `(a|a)*!` or `\w*\w*!` can take
seconds to hours on one 2,000-character row; the interpreter cannot interrupt a running match.
Regular expressions therefore run in a short-lived child interpreter (`python -I -S`, standard
library only) that is killed when the time budget is spent; the matches it reported before that
are kept. Plain substring search is linear and runs in process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator

from foldwise.offload._models import ArtifactRow, SearchMatch

__all__ = [
    "DEFAULT_SEARCH_SECONDS",
    "MAX_MATCHES",
    "MAX_PATTERN_CHARS",
    "SearchOutcome",
    "check_pattern",
    "search_rows",
]

MAX_PATTERN_CHARS = 500
"""Longer patterns are refused."""
MAX_MATCHES = 200
"""Upper bound of `max_matches`."""
DEFAULT_SEARCH_SECONDS = 2.0
"""Default time budget of one search."""
MAX_REGEX_SCAN_CHARS = 32_000_000
"""A regex search looks at no more than this many characters of an artifact."""
_OVERLAP = 200
"""Characters of the next wrapped row visible to a match that starts in a row."""

SearchOutcome = tuple[list[SearchMatch], bool, str | None]
"""Matches, whether every row was searched, and why not."""

# The worker reads a header line then one JSON line per row, and prints `row start end` per
# match as soon as it finds it, so output written before a kill is not lost.
_WORKER = """
import json, re, sys
head = json.loads(sys.stdin.readline())
rx = re.compile(head["pattern"])
found = 0
for line in sys.stdin:
    index, window, own = json.loads(line)
    m = rx.search(window)
    if m is not None and m.start() < own:
        sys.stdout.write("%d %d %d\\n" % (index, m.start(), m.end()))
        sys.stdout.flush()
        found += 1
        if found >= head["max"]:
            sys.stdout.write("MAX\\n")
            sys.exit(0)
sys.stdout.write("DONE\\n")
"""


def check_pattern(pattern: str, *, regex: bool) -> re.Pattern[str] | None:
    """Validate a search pattern; return the compiled regex in regex mode.

    Raises:
        ValueError: Empty, longer than 500 characters, or not a valid regular expression; the
            message is short enough to hand back to a model.
    """
    if not pattern:
        raise ValueError("empty pattern")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    if not regex:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None
    except RecursionError:
        raise ValueError("invalid regular expression: nested too deeply") from None


def _windows(rows: Iterable[ArtifactRow]) -> Iterator[tuple[ArtifactRow, str]]:
    """Each row with the start of the next row appended when it continues the same line."""
    previous: ArtifactRow | None = None
    for row in rows:
        if previous is not None:
            extra = row.text[:_OVERLAP] if row.continuation else ""
            yield previous, previous.text + extra
        previous = row
    if previous is not None:
        yield previous, previous.text


def _search_plain(
    rows: Iterable[ArtifactRow], pattern: str, max_matches: int, deadline: float
) -> SearchOutcome:
    matches: list[SearchMatch] = []
    for row, window in _windows(rows):
        position = window.find(pattern)
        if 0 <= position < len(row.text):
            matches.append(SearchMatch(row.index, position, position + len(pattern), row.text))
            if len(matches) >= max_matches:
                return matches, False, "max_matches"
        if time.monotonic() > deadline:
            return matches, False, "time budget"
    return matches, True, None


def _search_regex(
    rows: Iterable[ArtifactRow], pattern: str, max_matches: int, seconds: float
) -> SearchOutcome:
    texts: dict[int, str] = {}
    lines = [json.dumps({"pattern": pattern, "max": max_matches})]
    scanned = 0
    truncated = False
    for row, window in _windows(rows):
        if scanned > MAX_REGEX_SCAN_CHARS:
            truncated = True
            break
        texts[row.index] = row.text
        lines.append(json.dumps([row.index, window, len(row.text)]))
        scanned += len(row.text)
    payload = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    executable = sys.executable
    if not executable:
        return [], False, "regex search unavailable (no Python executable); use a plain pattern"
    try:
        proc = subprocess.Popen(
            [executable, "-I", "-S", "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        return [], False, f"regex search unavailable ({exc.strerror}); use a plain pattern"
    reason: str | None = None
    try:
        out, err = proc.communicate(payload, timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        reason = "time budget"
    matches: list[SearchMatch] = []
    finished = False
    for line in out.decode("ascii", "replace").splitlines():
        if line == "DONE":
            finished = True
        elif line == "MAX":
            reason = "max_matches"
        else:
            index, start, end = (int(part) for part in line.split())
            matches.append(SearchMatch(index, start, end, texts.get(index, "")))
    if reason is None and not finished:
        reason = "regex worker failed" + (f": {err.decode(errors='replace')[-200:]}" if err else "")
    if truncated and reason is None:
        reason = f"scan limit ({MAX_REGEX_SCAN_CHARS:,} characters)"
    return matches, finished and not truncated, reason


def search_rows(
    rows: Iterable[ArtifactRow],
    pattern: str,
    *,
    regex: bool = False,
    max_matches: int = 20,
    timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
) -> SearchOutcome:
    """Find the rows containing `pattern` (first match per row, in row order).

    A match may start in a row and run up to 200 characters into the next row of the same
    wrapped line.

    Args:
        rows: The rows, in order.
        pattern: A substring (case-sensitive) or a Python regular expression (use `(?i)` to
            ignore case).
        regex: Treat `pattern` as a regular expression.
        max_matches: Stop after this many matching rows (1 to 200).
        timeout_seconds: Time budget; a regex worker still running then is killed.

    Returns:
        `(matches, complete, stopped_reason)`.

    Raises:
        ValueError: The pattern is invalid (see `check_pattern`).
    """
    check_pattern(pattern, regex=regex)
    max_matches = max(1, min(MAX_MATCHES, max_matches))
    if regex:
        return _search_regex(rows, pattern, max_matches, timeout_seconds)
    return _search_plain(rows, pattern, max_matches, time.monotonic() + timeout_seconds)
