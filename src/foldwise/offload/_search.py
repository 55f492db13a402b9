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
from collections.abc import Iterable
from dataclasses import dataclass

from foldwise._steps import Io, Steps, run_sync
from foldwise.offload._models import ArtifactRow, SearchMatch

__all__ = [
    "DEFAULT_SEARCH_SECONDS",
    "MAX_MATCHES",
    "MAX_PATTERN_CHARS",
    "RowSearch",
    "SearchOutcome",
    "WorkerRun",
    "check_pattern",
    "run_regex_worker",
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


class RowSearch:
    """One search, fed the rows of an artifact in order; `finish_steps` gives the outcome.

    A match may start in a row and run up to 200 characters into the next row of the same
    wrapped line, so each row is searched once the next one is known.

    Args:
        pattern: A substring (case-sensitive) or a Python regular expression (use `(?i)` to
            ignore case).
        regex: Treat `pattern` as a regular expression.
        max_matches: Stop after this many matching rows (1 to 200).
        timeout_seconds: Time budget; a regex worker still running then is killed.

    Raises:
        ValueError: The pattern is invalid (see `check_pattern`).
    """

    def __init__(
        self,
        pattern: str,
        *,
        regex: bool = False,
        max_matches: int = 20,
        timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
    ) -> None:
        check_pattern(pattern, regex=regex)
        self.pattern, self.regex = pattern, regex
        self.max_matches = max(1, min(MAX_MATCHES, max_matches))
        self.timeout_seconds = timeout_seconds
        self._deadline = time.monotonic() + timeout_seconds
        self._previous: ArtifactRow | None = None
        self._matches: list[SearchMatch] = []
        self._reason: str | None = None
        self._stopped = False
        # Regex mode: the worker's input, built as rows arrive.
        self._texts: dict[int, str] = {}
        self._lines = [json.dumps({"pattern": pattern, "max": self.max_matches})]
        self._scanned = 0

    def feed(self, row: ArtifactRow) -> bool:
        """Take the next row; True once no further rows are needed."""
        previous, self._previous = self._previous, row
        if previous is not None:
            extra = row.text[:_OVERLAP] if row.continuation else ""
            self._consider(previous, previous.text + extra)
        return self._stopped

    def _consider(self, row: ArtifactRow, window: str) -> None:
        if self._stopped:
            return
        if self.regex:
            if self._scanned > MAX_REGEX_SCAN_CHARS:
                self._stopped = True
                self._reason = f"scan limit ({MAX_REGEX_SCAN_CHARS:,} characters)"
                return
            self._texts[row.index] = row.text
            self._lines.append(json.dumps([row.index, window, len(row.text)]))
            self._scanned += len(row.text)
            return
        position = window.find(self.pattern)
        if 0 <= position < len(row.text):
            end = position + len(self.pattern)
            self._matches.append(SearchMatch(row.index, position, end, row.text))
            if len(self._matches) >= self.max_matches:
                self._stopped, self._reason = True, "max_matches"
                return
        if time.monotonic() > self._deadline:
            self._stopped, self._reason = True, "time budget"

    def finish_steps(self) -> Steps[SearchOutcome]:
        """Search the last row, run the regex worker (off the event loop), give the outcome."""
        if self._previous is not None and not self._stopped:
            self._consider(self._previous, self._previous.text)
        self._previous = None
        if not self.regex:
            return self._matches, self._reason is None, self._reason
        payload = ("\n".join(self._lines) + "\n").encode("utf-8", "surrogatepass")
        run = yield Io.call(run_regex_worker, payload, self.timeout_seconds)
        return self._regex_outcome(run)

    def _regex_outcome(self, run: WorkerRun) -> SearchOutcome:
        if run.unavailable is not None:
            return [], False, f"regex search unavailable ({run.unavailable}); use a plain pattern"
        truncated = self._reason
        reason = "time budget" if run.killed else None
        finished = False
        for line in run.out.decode("ascii", "replace").splitlines():
            if line == "DONE":
                finished = True
            elif line == "MAX":
                reason = "max_matches"
            else:
                index, start, end = (int(part) for part in line.split())
                self._matches.append(SearchMatch(index, start, end, self._texts.get(index, "")))
        if reason is None and not finished:
            detail = run.err.decode(errors="replace")[-200:]
            reason = "regex worker failed" + (f": {detail}" if detail else "")
        return self._matches, finished and truncated is None, reason or truncated


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """What the regex worker printed, and whether it was killed or could not start."""

    out: bytes = b""
    err: bytes = b""
    killed: bool = False
    unavailable: str | None = None


def run_regex_worker(payload: bytes, seconds: float) -> WorkerRun:
    """Run the regex worker on `payload`, killing it after `seconds` (a blocking call)."""
    executable = sys.executable
    if not executable:
        return WorkerRun(unavailable="no Python executable")
    try:
        proc = subprocess.Popen(
            [executable, "-I", "-S", "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        return WorkerRun(unavailable=str(exc.strerror))
    try:
        out, err = proc.communicate(payload, timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return WorkerRun(out, err, killed=True)
    return WorkerRun(out, err)


def search_rows(
    rows: Iterable[ArtifactRow],
    pattern: str,
    *,
    regex: bool = False,
    max_matches: int = 20,
    timeout_seconds: float = DEFAULT_SEARCH_SECONDS,
) -> SearchOutcome:
    """Find the rows containing `pattern` (first match per row, in row order); blocking.

    Arguments as for `RowSearch`.

    Returns:
        `(matches, complete, stopped_reason)`.

    Raises:
        ValueError: The pattern is invalid (see `check_pattern`).
    """
    search = RowSearch(
        pattern, regex=regex, max_matches=max_matches, timeout_seconds=timeout_seconds
    )
    for row in rows:
        if search.feed(row):
            break
    return run_sync(search.finish_steps())
