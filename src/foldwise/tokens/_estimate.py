r"""Script-aware token estimate: a linear form over character classes, computed at C speed.

BPE tokenizers of the o200k family first split text into pre-tokens (a word with its leading
space, a run of up to three digits, a run of punctuation, a line break with its indentation)
and then merge bytes inside each piece. The estimate therefore counts pre-token *boundaries*
as well as characters:

- ASCII letters, letter runs, lower→upper transitions (camelCase humps) and upper-case pairs;
- digits and digit runs; punctuation and punctuation runs; line breaks; padding runs of spaces;
- non-ASCII characters by UTF-8 length: 2-byte (accented Latin, Cyrillic, Greek...), 3-byte
  (CJK ideographs, kana, hangul) with CJK and general punctuation apart, and 4-byte (emoji);
- JSON `\uXXXX` escapes (the default `ensure_ascii=True` of `json.dumps`), about 3.5 tokens
  each, and long base64/hex blobs, about 0.7 tokens per character.

Every count comes from C-level primitives: `bytes.translate` to a class alphabet followed by
`bytes.count` of one- and two-byte patterns, plus a compiled regex only where an escape or a
blob is present. No Python code runs per character.

The weights were fitted to exact `o200k_base` counts on the benchmark corpus
(`foldwise.bench`) plus generated base64 samples, checked on held-out text, and then scaled up
by 8 %: under-counting is the dangerous direction, since a request the counter believes fits
can overflow the window. `docs/tokens.md` has the measured errors.
"""

from __future__ import annotations

import re
import string

__all__ = ["estimate_tokens"]

# Tokens per occurrence of each feature (o200k_base fit x 1.08; see the module docstring).
W_LETTER = 0.054
W_LETTER_RUN = 0.894
W_CAMEL = 0.870
W_UPPER_PAIR = 0.240
W_DIGIT = 0.329
W_DIGIT_RUN = 1.208
W_PUNCT = 0.349
W_PUNCT_RUN = 0.375
W_NEWLINE = 0.879
W_PAD = 0.599
W_NONASCII_2 = 0.430
W_NONASCII_3 = 0.793
W_CJK_PUNCT = 1.647
W_NONASCII_4 = 1.620
W_ESCAPE = 3.817
W_BLOB_CHAR = 0.740


def _table(classify: dict[int, bytes]) -> bytes:
    """Build a 256-byte translation table mapping each byte to a class letter (default `_`)."""
    return bytes(classify.get(b, b"_")[0] for b in range(256))


_CASE = _table(
    dict.fromkeys(string.ascii_lowercase.encode(), b"l")
    | dict.fromkeys(string.ascii_uppercase.encode(), b"U")
)
_DIGIT = _table(dict.fromkeys(string.digits.encode(), b"a"))
_PUNCT = _table(dict.fromkeys(string.punctuation.encode(), b"a"))
_SPACE = _table({32: b" ", 9: b" ", 10: b"n", 13: b"n"})
_LEAD = _table(
    dict.fromkeys(range(192, 224), b"2")
    | dict.fromkeys(range(224, 240), b"3")
    | dict.fromkeys(range(240, 256), b"4")
)
# UTF-8 prefixes of general punctuation (U+2000..), CJK symbols (U+3000..) and full-width
# forms (U+FF00..): quotes, dashes, ellipses, 、。「」，：（）...
_CJK_PUNCT_PREFIXES = (b"\xe2\x80", b"\xe3\x80", b"\xef\xbc", b"\xef\xbd")
_ESCAPE_RE = re.compile(r"\\u[0-9a-fA-F]{4}")
_BLOB_RE = re.compile(r"[A-Za-z0-9+/_-]{64,}")
_BLOB_DENSITY = 40  # look for blobs when more than 1 char in 40 is a lower->upper transition


def _runs(mapped: bytes, ch: bytes) -> int:
    """Count maximal runs of `ch` in a two-letter `mapped` string (`ch` vs `_`)."""
    return mapped.count(b"_" + ch) + (mapped[:1] == ch)


def estimate_tokens(text: str) -> int:
    """Estimate the number of tokens of `text` for a modern BPE tokenizer (o200k-like).

    Latin text and code come out near 4 characters per token, CJK ideographs, kana and hangul
    near 0.8 tokens per character, and digit- or punctuation-dense JSON denser than prose. The
    estimate leans towards over-counting (about +8 % on the benchmark corpus).

    Args:
        text: Any string.

    Returns:
        A non-negative token estimate; 0 only for the empty string.
    """
    if not text:
        return 0
    escapes = blob = 0
    if "\\u" in text:
        text, escapes = _ESCAPE_RE.subn("", text)
    data = text.encode("utf-8", "surrogatepass")
    case = data.translate(_CASE)
    camel = case.count(b"lU")
    if camel * _BLOB_DENSITY > len(data):
        # Dense case flips: base64 or similar random text, which BPE barely compresses.
        before = len(text)
        text = _BLOB_RE.sub(" ", text)
        blob = before - len(text)
        if blob:
            data = text.encode("utf-8", "surrogatepass")
            case = data.translate(_CASE)
            camel = case.count(b"lU")
    letters = len(case) - case.count(b"_")
    letter_runs = case.count(b"_l") + case.count(b"_U") + (case[:1] != b"_")
    digits = data.translate(_DIGIT)
    punct = data.translate(_PUNCT)
    value = (
        W_LETTER * letters
        + W_LETTER_RUN * letter_runs
        + W_CAMEL * camel
        + W_UPPER_PAIR * case.count(b"UU")
        + W_DIGIT * digits.count(b"a")
        + W_DIGIT_RUN * _runs(digits, b"a")
        + W_PUNCT * punct.count(b"a")
        + W_PUNCT_RUN * _runs(punct, b"a")
        + W_NEWLINE * data.count(b"\n")
        + W_PAD * data.translate(_SPACE).count(b"_  ")
        + W_ESCAPE * escapes
        + W_BLOB_CHAR * blob
    )
    if not text.isascii():
        leads = data.translate(_LEAD)
        cjk_punct = sum(data.count(prefix) for prefix in _CJK_PUNCT_PREFIXES)
        value += (
            W_NONASCII_2 * leads.count(b"2")
            + W_NONASCII_3 * (leads.count(b"3") - cjk_punct)
            + W_CJK_PUNCT * cjk_punct
            + W_NONASCII_4 * leads.count(b"4")
        )
    return max(1, int(value + 0.999))
