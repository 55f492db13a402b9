r"""Cue patterns for constraints, decisions, plans, errors and artifacts.

They decide which sentences state constraints, decisions or plans, which lines are errors (and
how much each one looks like a real error rather than prose that mentions one), and which
tokens are artifacts (paths, URLs, identifiers). Every pattern is scanned once over its text
with no nested unbounded repetition that can backtrack across a long run, so cost stays linear
in the transcript size. Artifact patterns use ASCII classes with explicit look-arounds instead
of `\b`, because in Unicode mode `\b` sees no boundary between a Chinese character and a Latin
one (`在src/app.py里`); letters of other scripts are allowed inside a path only where they
cannot be prose around it (see `_ARTIFACT_RE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = [
    "CONSTRAINT_RE",
    "DECISION_RE",
    "ERROR_RE",
    "NEXT_RE",
    "PROSE_ERROR_RE",
    "REASON_START_RE",
    "STRONG_PLAN_RE",
    "error_tier",
    "find_artifacts",
    "may_state_plan",
    "one_line",
    "split_sentences",
]

_I = re.IGNORECASE
_APOS = "['’]"

CONSTRAINT_RE = re.compile(
    r"\b(?:must|must\s+not|mustn" + _APOS + r"?t|have\s+to|has\s+to|need\s+to|needs\s+to"
    r"|don" + _APOS + r"?t|do\s+not|does\s+not|doesn" + _APOS + r"?t|never|always|only"
    r"|instead|actually|should|shouldn" + _APOS + r"?t|make\s+sure|ensure|avoid|no\s+longer"
    r"|rather\s+than|prefer|stop|wrong|incorrect|not\s+\S[^.!?]{0,60}?\bbut)\b"
    r"|^(?:no|nope)\b"
    r"|必须|务必|一定要|一定得|不要|不用|不需要|不能|不可以|不许|禁止|千万|请勿|避免|记得|应该"
    r"|(?<![特区分类识级告差个性辨派鉴])别(?![人处的])|(?<![一两几每])只(?!是)"
    r"|不是.{0,30}?而是|而不是|改成|改为|换成|改用|保持|不对|错了",
    _I | re.MULTILINE,
)

DECISION_RE = re.compile(
    r"\b(?:decided|decide\s+to|decision|will\s+use|(?:i|we)" + _APOS + r"ll\s+use"
    r"|going\s+with|go\s+with|went\s+with|chose|choose|chosen|opted|opt\s+for"
    r"|switch(?:ed|ing)?\s+to|instead\s+of|settled\s+on|rather\s+than|in\s+favou?r\s+of"
    r"|because|so\s+that)\b"
    r"|决定|采用|选择|选用|改用|换用|因为|由于|为了|就用|确定用|打算用|方案是",
    _I,
)

REASON_START_RE = re.compile(
    r"^(?:because|since|this\s+is\s+because|that" + _APOS + r"s\s+because|the\s+reason"
    r"|so\s+that|as\s+a\s+result)\b|^(?:因为|由于|原因是|这样)",
    _I,
)

NEXT_RE = re.compile(
    r"\b(?:next|then|plan|planning|todo|to-do|will|(?:i|we)" + _APOS + r"ll|going\s+to"
    r"|remaining|still\s+need|need\s+to|after\s+that|afterwards|follow[- ]up|let\s+me)\b"
    r"|接下来|然后|下一步|之后|计划|待办|还需要|还要|将会|准备|稍后|我会|我将|随后|后续",
    _I,
)

STRONG_PLAN_RE = re.compile(
    r"\bnext\s+steps?\b|^next\b|\bnext\s*[:,]|\bnext,?\s+(?:i|we)\b"
    r"|\bplan(?:ned|s)?\s*(?:is|are|:|to)\b|\b(?:todo|to-do)\b|\bstill\s+need\b"
    r"|\bremaining\s+(?:steps?|work|tasks?)\b|\bfollow[- ]ups?\b"
    r"|接下来|下一步|计划|待办|还需要|后续",
    _I,
)
"""An explicit plan ("Next step: …", "下一步：…"), as opposed to a passing "I'll" or "then"."""
_STRONG_PLAN_WORDS = ("next", "plan", "todo", "to-do", "still", "remaining", "follow")
_STRONG_PLAN_CJK = ("接下来", "下一步", "计划", "待办", "还需要", "后续")


def may_state_plan(text: str) -> bool:
    """A cheap test: `False` means `text` has no explicit plan (`STRONG_PLAN_RE` cannot match)."""
    if any(word in text for word in _STRONG_PLAN_CJK):
        return True
    lowered = text.lower()
    return any(word in lowered for word in _STRONG_PLAN_WORDS)


ERROR_RE = re.compile(
    r"(?<![A-Za-z0-9_])[A-Za-z0-9_]*(?:Error|Exception|Timeout)(?![A-Za-z0-9_])"
    r"|Traceback|(?<![A-Za-z0-9_])(?:[Ff]ailed|FAILED|FAIL|[Ff]atal|FATAL|panic|ERROR)"
    r"(?![A-Za-z0-9_])|(?i:\berror:)|错误|失败|异常|报错"
)
"""Error cues in tool output."""

PROSE_ERROR_RE = re.compile(
    r"(?<![A-Za-z0-9_])[A-Za-z0-9_]*(?:Error|Exception|Timeout):|Traceback"
    r"|(?<![A-Za-z0-9_])(?:[Ff]ailed|FAILED|[Ff]atal|crash(?:ed|es)?)(?![A-Za-z0-9_])"
    r"|(?i:\berror:)|错误|失败|报错|崩溃"
)
"""Error cues in the assistant's prose, where a bare `ConfigError` is a name, not an error."""

_EXPLICIT_ERROR_RE = re.compile(
    r"(?i:error|fatal|panic)(?:\[[A-Za-z0-9_-]{1,20}\])?\s*:|Exception\s*:|[a-z]Timeout\s*:|Traceback"
    r"|(?<![A-Za-z0-9_])(?:ERR(?:OR|!)?|FATAL|FAIL(?:ED)?|CRITICAL|PANIC)(?![A-Za-z0-9_])"
    r"|(?:错误|失败|异常|报错)\s*[:：]"
)
"""An error report anywhere in a line: an exception with its message, a log level, a verdict."""
_EXPLICIT_START_RE = re.compile(
    r"(?:E\s+)?[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception)(?![A-Za-z0-9_])"
    r"|[\[【(（]\s*(?:错误|失败|异常|报错)\s*[\]】)）]"
)
"""An error report by its first word: `ValueError`, `E   KeyError`, `【错误】`."""
_PROSE_LINE_RE = re.compile(r"[。！？]|[.!?]\s+\S")


def error_tier(line: str, *, prose: bool = False) -> int:
    """Rank an error line: 0 an explicit error report, 1 a plain mention, 2 prose about errors.

    Args:
        line: One line that matched an error cue (already clipped to what is shown).
        prose: The line comes from the assistant's own text, not from tool output; its
            explicit errors rank 1 and everything else 2.
    """
    line = line.strip()
    explicit = bool(_EXPLICIT_START_RE.match(line) or _EXPLICIT_ERROR_RE.search(line))
    if prose:
        return 1 if explicit else 2
    if explicit:
        return 0
    return 2 if len(line) > 120 or _PROSE_LINE_RE.search(line) else 1


# ASCII sentence ends need whitespace after them (so `app.py` is not split); CJK ones do not.
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_BULLET_RE = re.compile(r"^(?:[-*•+]\s+|\d{1,3}[.)]\s+|>\s*)")
_SPACE_RE = re.compile(r"\s+")


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace and cut `text` to `limit` characters (marking the cut with `…`)."""
    text = _SPACE_RE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = limit - 1
    if cut and 0xD800 <= ord(text[cut - 1]) <= 0xDBFF:
        cut -= 1
    return text[:cut].rstrip() + "…"


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences and lines, without list bullets; blank ones dropped."""
    out: list[str] = []
    for raw in _SENTENCE_SPLIT_RE.split(text):
        sentence = _BULLET_RE.sub("", raw.strip())
        if sentence:
            out.append(sentence)
    return out


# Path characters: ASCII ones plus the letters of alphabets written with spaces between words
# (Latin, Greek, Cyrillic), which cannot run into the prose around a path.
_ALPHABETS = r"\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u024F\u0370-\u03FF\u0400-\u04FF"
_P = r"[A-Za-z0-9_.@+\-" + _ALPHABETS + "]"
# Scripts written without spaces (kana, Han, Hangul): inside a path only where no prose can
# stick to it (see `_PATH_START` and `_LAST`).
_CJK = r"\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uAC00-\uD7AF\uF900-\uFAFF"
_U = "[" + _CJK + "]"
_PU = r"[A-Za-z0-9_.@+\-" + _ALPHABETS + _CJK + "]"
_DIR = _PU + "+/"
# A path starts with a segment of path characters, or after `/`, `~/`, `./`; or with a CJK
# letter only at a line start or after a blank, a quote, a bracket or punctuation, and then
# without Latin letters glued to it (`修改src/` is prose before the path `src/`).
_PATH_START = (
    r"(?:(?:~|\.{1,2})?/" + _DIR + r"|(?:~|\.{1,2})?" + _P + r"+/"
    r"|" + _U + r"(?<![^\s\"'(\[{<=:,;，。：；、（「『【《]" + _U + ")[" + _CJK + r"0-9]*"
    r"(?:[_.@+\-]" + _PU + r"*)?/)"
)
# The last segment ends on a run of path characters (`中文.py`), so prose right after a path
# (`api.py里`) stays out; its runs alternate between two disjoint classes, so no backtracking.
_LAST = _P + r"*(?:" + _U + r"+" + _P + r"+)*"
_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|vue|svelte|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg"
    "|conf|env|lock|csv|tsv|sql|db|sqlite|sh|bash|zsh|ps1|go|rs|java|kt|scala|c|h|cc|cpp|hpp"
    "|cs|rb|php|swift|html|css|scss|xml|proto|tf|gradle|log|pdf|png|jpe?g|gif|svg|docx?|xlsx?"
    "|pptx?|zip|tar|gz|whl"
)
# One shared look-behind up front: inside a word it fails at once, so the alternatives are only
# tried where a token starts (that keeps a megabyte of tool output in the tens of milliseconds).
# The look-behind holds every path character (accented letters too: a path attempt inside a run
# of them would rescan the run at each position), and no artifact starts between two CJK
# letters, so Chinese prose is skipped just as fast.
_ARTIFACT_RE = re.compile(
    r"`(?P<tick>[^`\n]{1,120})`"
    r"|(?<![A-Za-z0-9_.@+~/\\\-" + _ALPHABETS + r"])(?!" + _U + r"(?<=" + _U + _U + r"))(?:"
    r"(?P<url>https?://[A-Za-z0-9\-._~:/?#\[\]@!$&*+,;=%]+)"
    r"|(?P<win>[A-Za-z]:\\(?:[^\\\s\"'<>|*?:`]+\\)*[^\\\s\"'<>|*?:`]+)"
    r"|(?P<kv>[A-Za-z_]*(?:_id|Id|ID|\bid)\s*[=:]\s*[\"']?[A-Za-z0-9_\-]{3,64})"
    r"|(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![A-Za-z0-9_]))"
    r"|(?P<path>" + _PATH_START + r"(?:" + _DIR + r")*" + _LAST + r")"
    r"|(?P<file>[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*\.(?:" + _EXTENSIONS + r")(?![A-Za-z0-9_]))"
    r"|(?P<ticket>[A-Z][A-Z0-9]{1,9}-[0-9]{1,6}(?![A-Za-z0-9_]))"
    r"|(?P<hash>(?:[0-9a-f]{7,40}|[0-9a-f]{64})(?![A-Za-z0-9_]))"
    r")"
)
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][\w.:]*(?:\(\))?|[\w.\-/~]+/[\w.\-]+|[\w\-]+\.[A-Za-z]{1,8}")
_NOT_TICKETS = frozenset(
    {"UTF", "SHA", "ISO", "GPT", "AES", "RSA", "TLS", "SSL", "COVID", "MP", "ES", "IPV", "HTTP"}
)
_BORING_TICKS = frozenset({"None", "True", "False", "null", "true", "false", "self", "cls"})
_TRAILING = ".,;:!?'\""


def _path_ok(path: str) -> bool:
    segments = [s for s in path.split("/") if s not in ("", ".", "..", "~")]
    if not segments or all(s.replace(".", "").isdigit() for s in segments):
        return False  # `/`, `../`, dates like 2024/01/02
    if path.startswith(("/", "./", "../", "~/")) or path.endswith("/"):
        return True
    return path.count("/") >= 2 or "." in segments[-1].strip(".")


def _classify(match: re.Match[str]) -> str | None:
    kind = match.lastgroup
    value = match.group(kind or 0)
    if kind == "url":
        value = value.rstrip(_TRAILING)
        if value.endswith("]") and value.count("[") < value.count("]"):
            value = value[:-1]
        return value if len(value) > len("https://x") else None
    if kind == "tick":
        value = value.strip()
        if value in _BORING_TICKS or not _IDENTIFIER_RE.fullmatch(value):
            return None
        return value
    if kind == "path":
        value = value.rstrip(_TRAILING)
        return value if _path_ok(value) else None
    if kind == "ticket":
        return None if value.split("-", 1)[0] in _NOT_TICKETS else value
    if kind == "hash":
        has_digit = any(c.isdigit() for c in value)
        return value if has_digit and not value.isdigit() else None
    if kind == "kv":
        return _SPACE_RE.sub("", value).replace('"', "").replace("'", "")
    return value.rstrip(_TRAILING) if kind in ("win", "file") else value


def find_artifacts(text: str, limit: int) -> Iterator[str]:
    """Yield up to `limit` distinct artifact strings found in `text`, in first-seen order."""
    if limit <= 0:
        return
    seen: set[str] = set()
    raw_seen: set[str] = set()
    for match in _ARTIFACT_RE.finditer(text):
        raw = match.group()
        if raw in raw_seen:
            continue
        raw_seen.add(raw)
        value = _classify(match)
        if value and value not in seen:
            seen.add(value)
            yield value
            if len(seen) >= limit:
                return
