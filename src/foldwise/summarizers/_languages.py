"""Section headings per language, and which language a conversation is written in.

Adding a language is one `SummaryLanguage` row in `LANGUAGES` (and, if it has its own script,
a branch in `detect_language`); the parser recognises the headings of every row, so summaries
written in one language merge with summaries written in another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "LANGUAGES",
    "SECTION_KEYS",
    "SectionKey",
    "SummaryLanguage",
    "detect_language",
    "heading_language",
    "is_none_marker",
    "is_same_marker",
    "section_for_heading",
]

SectionKey = Literal[
    "intent", "latest", "constraints", "decisions", "artifacts", "errors", "tools", "next"
]
SECTION_KEYS: tuple[SectionKey, ...] = (
    "intent",
    "latest",
    "constraints",
    "decisions",
    "artifacts",
    "errors",
    "tools",
    "next",
)


@dataclass(frozen=True)
class SummaryLanguage:
    """The fixed words of a summary in one language.

    Attributes:
        code: Short language code (`en`, `zh`, ...).
        headings: One heading per section key.
        none: What an empty section says.
        same_as_intent: What the latest-request section says when it repeats the intent.
    """

    code: str
    headings: Mapping[SectionKey, str]
    none: str
    same_as_intent: str


def _language(code: str, none: str, same: str, headings: tuple[str, ...]) -> SummaryLanguage:
    return SummaryLanguage(
        code, MappingProxyType(dict(zip(SECTION_KEYS, headings, strict=True))), none, same
    )


LANGUAGES: Mapping[str, SummaryLanguage] = MappingProxyType(
    {
        "en": _language(
            "en",
            "None",
            "(same as the session intent)",
            (
                "Session intent",
                "Latest user request",
                "User constraints and corrections",
                "Decisions",
                "Artifacts",
                "Errors seen",
                "Tool calls made",
                "Next steps",
            ),
        ),
        "zh": _language(
            "zh",
            "无",
            "（同会话意图）",
            (
                "会话意图",
                "最新用户请求",
                "用户约束与更正",
                "决策",
                "产物",
                "遇到的错误",
                "已调用的工具",
                "下一步",
            ),
        ),
    }
)

# Headings other summarizers write (foldwise's default prompt, LangChain's and DeerFlow's),
# so a model-written summary merges section by section too.
_ALIASES: dict[str, SectionKey] = {
    "intent": "intent",
    "goal": "intent",
    "user goal": "intent",
    "session goal": "intent",
    "latest request": "latest",
    "current request": "latest",
    "constraints": "constraints",
    "user constraints": "constraints",
    "constraints and corrections": "constraints",
    "summary": "decisions",
    "decisions with reasons": "decisions",
    "key decisions": "decisions",
    "files": "artifacts",
    "errors": "errors",
    "errors and fixes": "errors",
    "tool calls": "tools",
    "tools used": "tools",
    "next step": "next",
    "open tasks": "next",
    "open tasks and next steps": "next",
    "remaining tasks": "next",
    "pending tasks": "next",
    "todo": "next",
}

_SPACE_RE = re.compile(r"\s+")


def _normalize_heading(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip().casefold()


_HEADING_INDEX: dict[str, SectionKey] = dict(_ALIASES)
_HEADING_LANGUAGE: dict[str, str] = {}
for _row in LANGUAGES.values():
    for _key, _heading in _row.headings.items():
        _HEADING_INDEX[_normalize_heading(_heading)] = _key
        _HEADING_LANGUAGE[_normalize_heading(_heading)] = _row.code
_NONE_WORDS = frozenset(
    {"none", "none.", "n/a", "(none)", "无", "无。", "（无）"}
    | {row.none.casefold() for row in LANGUAGES.values()}
)
_SAME_WORDS = frozenset(row.same_as_intent.casefold() for row in LANGUAGES.values())


def section_for_heading(title: str) -> SectionKey | None:
    """Map a heading's text (any known language or alias, any case) to its section key."""
    return _HEADING_INDEX.get(_normalize_heading(title))


def heading_language(title: str) -> str | None:
    """The `LANGUAGES` key whose heading `title` is, if it is one of foldwise's own."""
    return _HEADING_LANGUAGE.get(_normalize_heading(title))


def is_none_marker(text: str) -> bool:
    """Whether `text` is an empty-section marker (`None`, `无`, ...)."""
    return _normalize_heading(text) in _NONE_WORDS


def is_same_marker(text: str) -> bool:
    """Whether `text` says the latest request repeats the session intent."""
    return _normalize_heading(text) in _SAME_WORDS


_HAN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z]{2,}")
_SAMPLE_CHARS = 50_000


def detect_language(text: str) -> str | None:
    """Guess the summary language of `text`; `None` when it has no letters to go by.

    Chinese wins when Han characters are at least as many as Latin words (a Chinese sentence
    mentioning `src/app.py` and `timeout` is still Chinese). Only the head and tail of long
    texts are sampled.

    Args:
        text: The user's text, joined.

    Returns:
        A key of `LANGUAGES`, or `None`.
    """
    if len(text) > 2 * _SAMPLE_CHARS:
        text = text[:_SAMPLE_CHARS] + "\n" + text[-_SAMPLE_CHARS:]
    han = len(_HAN_RE.findall(text))
    words = len(_LATIN_WORD_RE.findall(text))
    if han == 0 and words == 0:
        return None
    return "zh" if han >= words else "en"
