"""Whose data is it: the store namespace and the memory user of an authenticated identity.

Identities come from API keys or the authenticator hook and may hold any printable character;
store labels may not contain a period and memory namespace parts are 1-128 characters of
``A-Z a-z 0-9 _ . @ : + -``. Each mapping keeps an identity that already fits verbatim (so
``alice`` stays readable in the database and in `foldwise memory --user alice`) and replaces
any other by ``sha256-`` and its digest. An identity that itself starts with ``sha256-`` is
hashed too, so no identity can choose a name that equals another's digest: the mappings are
one-to-one.
"""

from __future__ import annotations

import hashlib
import re

from foldwise.gateway._auth import LOCAL_IDENTITY
from foldwise.memory._identity import DEFAULT_USER

__all__ = ["TENANT_ROOT", "memory_user_id", "store_tenant_label"]

TENANT_ROOT = "foldwise_tenant:"
"""Start of the first label of every store namespace the gateway writes; reserved for it."""

_HASHED = "sha256-"
_STORE_SAFE = re.compile(r"[A-Za-z0-9_@:+-]{0,128}")
_MEMORY_SAFE = re.compile(r"[A-Za-z0-9_.@:+-]{1,128}")


def _fit(identity: str, safe: re.Pattern[str]) -> str:
    if safe.fullmatch(identity) and not identity.startswith(_HASHED):
        return identity
    return _HASHED + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()


def store_tenant_label(identity: str) -> str:
    """The store label every namespace of `identity` is kept under (``foldwise_tenant:alice``).

    Without auth (`LOCAL_IDENTITY`) it is ``foldwise_tenant:`` alone.
    """
    return TENANT_ROOT + _fit(identity, _STORE_SAFE)


def memory_user_id(identity: str) -> str:
    """The ``user_id`` of `identity`'s long-term memory (``("users", user_id, ...)``).

    Without auth (`LOCAL_IDENTITY`) it is ``default``, the user of library runs that name
    none. Runs served by the gateway must put this value (not the raw identity) into
    ``configurable.user_id``, so that what they remember is what the memory routes show.
    """
    if identity == LOCAL_IDENTITY:
        return DEFAULT_USER
    return _fit(identity, _MEMORY_SAFE)
