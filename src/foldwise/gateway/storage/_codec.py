"""JSON encoding, JSON containment, clocks and argument checks shared by both backends.

Both backends must store and return the same values, so the encoding rules live here:

- JSON is written with ``ensure_ascii=False`` and ``allow_nan=False`` (NaN and infinities are
  not JSON and Postgres refuses them).
- U+0000 and lone surrogates (U+D800..U+DFFF) cannot be stored by Postgres (`jsonb`/`text`)
  nor encoded as UTF-8, so both backends replace them with U+FFFD in every string and key.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "REPLACEMENT_CHAR",
    "check_holder",
    "check_page",
    "check_ttl",
    "clean_text",
    "dumps",
    "json_contains",
    "loads_object",
    "sanitize_json",
    "utcnow",
]

REPLACEMENT_CHAR = "\ufffd"
MAX_PAGE = 1000
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def utcnow() -> datetime:
    """Return the current time as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


def clean_text(value: str) -> str:
    """Return `value` with NUL and lone surrogates replaced by U+FFFD (for TEXT columns)."""
    return _BAD_CHARS.sub(REPLACEMENT_CHAR, value)


def sanitize_json(value: Any) -> Any:
    """Return `value` with NUL and lone surrogates in strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {
            (clean_text(k) if isinstance(k, str) else k): sanitize_json(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [sanitize_json(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Encode `value` as JSON text the way both backends store it.

    Args:
        value: A JSON-compatible value.

    Returns:
        The JSON text.

    Raises:
        TypeError: A value is not JSON serializable.
        ValueError: A float is NaN or infinite, or the value nests too deeply.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        # NUL is always written as the escape \u0000; surrogates stay raw with ensure_ascii off.
        if "\\u0000" in text or _BAD_CHARS.search(text):
            text = json.dumps(
                sanitize_json(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
            )
    except RecursionError as exc:
        raise ValueError("JSON value nests too deeply to store") from exc
    return text


def loads_object(text: str | bytes | dict[str, Any]) -> dict[str, Any]:
    """Decode a stored JSON object (SQLite gives text, Postgres may give a dict already)."""
    value = text if isinstance(text, dict) else json.loads(text)
    if not isinstance(value, dict):  # pragma: no cover - the schema only stores objects
        raise ValueError("stored JSON value is not an object")
    return value


def _scalar_equal(a: Any, b: Any) -> bool:
    # JSON true is not the number 1, although Python says True == 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _contains(doc: Any, query: Any) -> bool:
    if isinstance(query, dict):
        return isinstance(doc, dict) and all(
            key in doc and _contains(doc[key], sub) for key, sub in query.items()
        )
    if isinstance(query, list):
        return isinstance(doc, list) and all(
            any(_contains(item, sub) for item in doc) for sub in query
        )
    if isinstance(doc, dict | list):
        return False
    return _scalar_equal(doc, query)


def json_contains(document: str | None, query: str | None) -> bool:
    """Postgres `jsonb @>` semantics for two JSON texts (registered as a SQLite function).

    Objects contain objects whose keys they have with contained values; arrays contain arrays
    whose every element is contained in some element; scalars must be equal (`true` is not
    `1`). The top-level "array contains a scalar" special case of Postgres is not needed
    because metadata is always an object.

    Args:
        document: The stored JSON text.
        query: The filter JSON text.

    Returns:
        Whether `document` contains `query`; `False` when either is `None`.
    """
    if document is None or query is None:
        return False
    return _contains(json.loads(document), json.loads(query))


def check_page(limit: int, offset: int = 0) -> None:
    """Validate pagination arguments.

    Raises:
        ValueError: `limit` is outside 1..1000 or `offset` is negative.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be an integer in 1..{MAX_PAGE}, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")


def check_ttl(ttl_seconds: float) -> float:
    """Validate a lease duration and return it as a float.

    Raises:
        ValueError: The ttl is not a finite positive number.
    """
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise ValueError(f"ttl_seconds must be a number, got {ttl_seconds!r}")
    ttl = float(ttl_seconds)
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"ttl_seconds must be a finite positive number, got {ttl_seconds!r}")
    return ttl


def check_holder(holder: str, kind: str | None = None) -> None:
    """Validate a lock holder (and kind) before SQL.

    Raises:
        ValueError: Empty or longer than 256 (holder) / 64 (kind) characters.
    """
    if not isinstance(holder, str) or not 0 < len(holder) <= 256:
        raise ValueError("lock holder must be a non-empty string of at most 256 characters")
    if kind is not None and (not isinstance(kind, str) or not 0 < len(kind) <= 64):
        raise ValueError("lock kind must be a non-empty string of at most 64 characters")
