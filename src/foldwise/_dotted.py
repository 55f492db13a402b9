"""`dotted_key`: where a validation error is, written the way the user writes the key."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["dotted_key"]


def dotted_key(loc: Sequence[int | str]) -> str:
    """Join a pydantic error location into a key such as ``models[0].name``.

    Args:
        loc: The location parts: field names, and list indexes as integers.

    Returns:
        The dotted key (empty for an empty location).
    """
    key = ""
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            key += f".{part}" if key else str(part)
    return key
