"""Validation of the ids that reach SQL: thread ids and run ids."""

from __future__ import annotations

import re

from foldwise.gateway.storage._errors import (
    InvalidIdError,
    InvalidRunIdError,
    InvalidThreadIdError,
)

__all__ = ["validate_run_id", "validate_thread_id"]

# A canonical UUID (8-4-4-4-12 hex) also matches this pattern, so one rule covers both.
_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def validate_thread_id(value: object) -> str:
    """Return `value` if it is a valid thread id.

    Valid ids are UUIDs or 1-128 characters from ``A-Z a-z 0-9 _ -``; they are safe in SQL,
    URLs and file names on every backend.

    Args:
        value: The candidate id.

    Returns:
        The id, unchanged.

    Raises:
        InvalidThreadIdError: `value` is not a string or does not match the pattern.
    """
    return _checked(value, InvalidThreadIdError)


def validate_run_id(value: object) -> str:
    """Like `validate_thread_id`, for run ids: raise `InvalidRunIdError` on an invalid id."""
    return _checked(value, InvalidRunIdError)


def _checked(value: object, error: type[InvalidIdError]) -> str:
    if not isinstance(value, str) or _ID_PATTERN.fullmatch(value) is None:
        raise error(value)
    return value
