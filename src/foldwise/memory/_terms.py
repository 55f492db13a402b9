"""The one tokenizer memory search uses, for indexing and for queries, in every backend.

Built-in full-text tokenizers split on spaces and punctuation, so a run of Chinese or Japanese
characters becomes one token: SQLite FTS5's ``unicode61`` indexes "我住在北京" as a single term,
and a query for ``北京`` finds nothing. Here every backend indexes the *same* pre-tokenized
terms (SQLite FTS5 and PostgreSQL only split them on spaces again):

- text is NFKC-folded (full-width ``ＡＢＣ１`` becomes ``abc1``) and lower-cased;
- a run of CJK characters (Han, Hiragana, Katakana, Hangul) is indexed as its unigrams *and*
  its bigrams: ``我住在北京`` gives ``我 住 在 北 京 我住 住在 在北 北京``;
- any other run of letters and digits is one word (``Python``, ``3.12`` gives ``3`` and ``12``),
  cut to its first `MAX_WORD_CHARS` characters (a base64 blob is not a search term, and
  PostgreSQL refuses lexemes over 2 KB).

A query splits the same way, but a CJK run of two or more characters contributes only its
bigrams (``北京大学`` gives ``北京 京大 大学``: an exact phrase matches every one of them and
ranks first), and a lone CJK character its unigram. Mixed-script queries keep every term
(``Python 数据`` gives ``python 数据``), so an English hit never hides a Chinese one; only the
first `MAX_QUERY_TERMS` distinct terms count (a whole message may be used as a query).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["MAX_QUERY_TERMS", "MAX_WORD_CHARS", "index_terms", "query_terms"]

MAX_WORD_CHARS = 64
"""Longer non-CJK words are indexed and queried by their first 64 characters."""
MAX_QUERY_TERMS = 64
"""A query keeps its first 64 distinct terms."""

_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana (incl. the prolonged sound mark)
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # Han extension A
    "\u4e00-\u9fff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # Han compatibility
    "\U00020000-\U0003134f"  # Han extensions B-G
)
_TOKEN = re.compile(f"([{_CJK}]+)|([^\\W_{_CJK}]+)")


def _runs(text: str) -> list[tuple[bool, str]]:
    """``(is_cjk, run)`` for each run of CJK characters or of other letters/digits."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return [(bool(cjk), cjk or word[:MAX_WORD_CHARS]) for cjk, word in _TOKEN.findall(folded)]


def index_terms(text: str) -> list[str]:
    """The terms to index for `text`, repeated as often as they occur (BM25 counts them).

    Args:
        text: A fact's text, in any script.

    Returns:
        Latin/other words, and for each CJK run its unigrams followed by its bigrams.
    """
    terms: list[str] = []
    for cjk, run in _runs(text):
        if cjk:
            terms.extend(run)
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            terms.append(run)
    return terms


def query_terms(text: str) -> list[str]:
    """The distinct terms of a search query, in order of first appearance.

    Args:
        text: What the user or the model searches for.

    Returns:
        Words, and for each CJK run its bigrams (a single CJK character: itself).
        At most `MAX_QUERY_TERMS`; empty when the query has no letters or digits.
    """
    terms: list[str] = []
    for cjk, run in _runs(text):
        if not cjk or len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
