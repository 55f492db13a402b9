"""LangGraph Server's store API over the gateway's LangGraph store, one tenant per identity.

`PUT /store/items`, `GET /store/items`, `DELETE /store/items`, `POST /store/items/search` and
`POST /store/namespaces` take and return what LangGraph Server does, so `langgraph_sdk`'s
``client.store.*`` (Python and JS) work unchanged: a put or delete answers 204, a missing item
``null`` (200), items carry ``namespace``, ``key``, ``value``, ``created_at``, ``updated_at``
(and ``score`` in a search).

Tenant isolation: every namespace a caller names is stored under one more, first label that
only the gateway writes, ``foldwise_tenant:<identity>`` (`store_tenant_label`), and that label
is removed from every namespace in the answers. A caller cannot name another tenant's label
(labels starting with ``foldwise_tenant:`` are refused), so no put, read, search or namespace
listing reaches another identity's items, and nothing in an answer reveals that they exist.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from langgraph.store.base import BaseStore, Item
from pydantic import Field

from foldwise.errors import StorageError
from foldwise.gateway._deps import Gateway, GatewayDep, IdentityDep
from foldwise.gateway._errors import RequestFieldError
from foldwise.gateway._messages import check_values
from foldwise.gateway._schemas import MAX_OFFSET, MAX_PAGE, _LangGraphBody, check_filter_ints
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway._tenancy import TENANT_ROOT, store_tenant_label

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_NAMESPACE_DEPTH",
    "StoreDelete",
    "StoreNamespaces",
    "StorePut",
    "StoreSearch",
    "router",
]

router = APIRouter(tags=["store"])
logger = logging.getLogger(__name__)

MAX_NAMESPACE_DEPTH = 16
"""Most labels in a namespace (prefix, suffix) a caller may name."""
MAX_LABEL_CHARS = 256
"""Longest namespace label."""
MAX_KEY_CHARS = 1024
"""Longest item key."""
MAX_TTL_MINUTES = 60 * 24 * 366 * 10
"""Longest item TTL: ten years, in minutes."""

_FILTER_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_FILTER_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_MAX_FILTER_KEYS = 32
_Labels = Annotated[list[Any], Field(max_length=MAX_NAMESPACE_DEPTH)]


class StorePut(_LangGraphBody):
    """`PUT /store/items`."""

    namespace: _Labels
    key: str
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    ttl: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)


class StoreDelete(_LangGraphBody):
    """`DELETE /store/items`."""

    namespace: _Labels
    key: str


class StoreSearch(_LangGraphBody):
    """`POST /store/items/search`."""

    namespace_prefix: _Labels = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    query: str | None = Field(default=None, max_length=10_000)
    refresh_ttl: bool | None = None


class StoreNamespaces(_LangGraphBody):
    """`POST /store/namespaces`."""

    prefix: _Labels | None = None
    suffix: _Labels | None = None
    max_depth: int | None = Field(default=None, ge=1, le=MAX_NAMESPACE_DEPTH)
    limit: int = Field(default=100, ge=1, le=MAX_PAGE)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


def _labels(labels: Sequence[Any], field: str, *, empty: bool = False) -> tuple[str, ...]:
    """`labels` checked as a store namespace, or `RequestFieldError` naming the bad label."""
    if not labels and not empty:
        raise RequestFieldError(field, "must name at least one label")
    if len(labels) > MAX_NAMESPACE_DEPTH:
        raise RequestFieldError(field, f"must have at most {MAX_NAMESPACE_DEPTH} labels")
    for index, label in enumerate(labels):
        where = f"{field}[{index}]"
        if not isinstance(label, str) or not label:
            raise RequestFieldError(where, "must be a non-empty string")
        if "." in label or "\x00" in label:
            raise RequestFieldError(where, "must not contain periods or NUL characters")
        check_values(label, where)
        if len(label) > MAX_LABEL_CHARS:
            raise RequestFieldError(where, f"must be at most {MAX_LABEL_CHARS} characters")
        if label.startswith(TENANT_ROOT):
            raise RequestFieldError(where, f"labels starting with {TENANT_ROOT!r} are reserved")
    return tuple(labels)


def _key(key: str, field: str = "key") -> str:
    if not key or len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise RequestFieldError(field, f"must be 1-{MAX_KEY_CHARS} characters without NUL")
    check_values(key, field)
    return key


def _value(value: dict[str, Any]) -> dict[str, Any]:
    """An item's value checked as storable JSON (both stores serialize it with orjson)."""
    check_values(value, "value", nul=False)  # PostgreSQL's jsonb holds no NUL
    check_filter_ints(value, "value")  # orjson and SQL integers stop at 64 bits
    return value


def _filter(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if not value:
        return None
    if len(value) > _MAX_FILTER_KEYS:
        raise RequestFieldError("filter", f"must have at most {_MAX_FILTER_KEYS} keys")
    for key, condition in value.items():
        if not _FILTER_KEY.fullmatch(key):
            raise RequestFieldError("filter", f"key {key!r} must be 1-128 of A-Z a-z 0-9 _ . -")
        if isinstance(condition, dict):
            unknown = sorted(set(condition) - _FILTER_OPS)
            if unknown or not condition:
                ops = ", ".join(sorted(_FILTER_OPS))
                raise RequestFieldError(f"filter.{key}", f"operators are {ops}; got {unknown}")
    check_values(value, "filter", nul=False)
    check_filter_ints(value, "filter")
    return value


def _utc(moment: datetime) -> str:
    # SQLite's store keeps CURRENT_TIMESTAMP, which is UTC without an offset: say so.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


def _item_json(item: Item) -> dict[str, Any]:
    """An item as LangGraph Server returns it, with the tenant label removed."""
    data: dict[str, Any] = item.dict()
    data["namespace"] = data["namespace"][1:]
    data["created_at"], data["updated_at"] = _utc(item.created_at), _utc(item.updated_at)
    return data


def _driver_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:  # the postgres extra is not installed
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


_DRIVER_ERRORS = _driver_errors()


@asynccontextmanager
async def _database(operation: str) -> AsyncIterator[None]:
    """A database failure of the store becomes `StorageError` (503), its text kept in the log."""
    try:
        yield
    except _DRIVER_ERRORS as error:
        logger.warning("store %s failed: %s: %s", operation, type(error).__name__, error)
        raise StorageError(f"the store could not {operation}; retry shortly") from error


def _store(gateway: Gateway) -> BaseStore:
    if gateway.store is None:
        raise StorageError("the gateway's store is not open")
    return gateway.store


@router.put("/store/items", status_code=204)
async def put_item(body: StorePut, gateway: GatewayDep, identity: IdentityDep) -> Response:
    """Store or replace an item (`client.store.put_item`); 204."""
    namespace, key = _labels(body.namespace, "namespace"), _key(body.key)
    value = _value(body.value)
    async with _database("write the item"):
        await _store(gateway).aput(
            (store_tenant_label(identity), *namespace),
            key,
            value,
            index=body.index,
            ttl=body.ttl,
        )
    return Response(status_code=204)


@router.get("/store/items")
async def get_item(
    gateway: GatewayDep,
    identity: IdentityDep,
    key: Annotated[str, Query(max_length=MAX_KEY_CHARS)],
    namespace: Annotated[str, Query(max_length=MAX_NAMESPACE_DEPTH * (MAX_LABEL_CHARS + 1))] = "",
    refresh_ttl: bool | None = None,
) -> Response:
    """One item (`client.store.get_item`; the namespace joined with periods), or `null`."""
    labels, key = _labels(namespace.split("."), "namespace"), _key(key)
    async with _database("read the item"):
        item = await _store(gateway).aget(
            (store_tenant_label(identity), *labels), key, refresh_ttl=refresh_ttl
        )
    return JSONResponse(None if item is None else _item_json(item))


@router.delete("/store/items", status_code=204)
async def delete_item(body: StoreDelete, gateway: GatewayDep, identity: IdentityDep) -> Response:
    """Delete an item if it exists (`client.store.delete_item`); 204 either way."""
    namespace, key = _labels(body.namespace, "namespace"), _key(body.key)
    async with _database("delete the item"):
        await _store(gateway).adelete((store_tenant_label(identity), *namespace), key)
    return Response(status_code=204)


@router.post("/store/items/search")
async def search_items(body: StoreSearch, gateway: GatewayDep, identity: IdentityDep) -> Response:
    """Items under a namespace prefix, filtered by value fields (`client.store.search_items`)."""
    prefix = _labels(body.namespace_prefix, "namespace_prefix", empty=True)
    where = _filter(body.filter)
    async with _database("search"):
        items = await _store(gateway).asearch(
            (store_tenant_label(identity), *prefix),
            query=body.query,
            filter=where,
            limit=body.limit,
            offset=body.offset,
            refresh_ttl=body.refresh_ttl,
        )
    return JSONResponse({"items": [_item_json(item) for item in items]})


@router.post("/store/namespaces")
async def list_namespaces(
    body: StoreNamespaces, gateway: GatewayDep, identity: IdentityDep
) -> Response:
    """The caller's namespaces matching a prefix / suffix (`client.store.list_namespaces`)."""
    prefix = _labels(body.prefix or [], "prefix", empty=True)
    suffix = _labels(body.suffix, "suffix") if body.suffix else None
    if suffix is not None and suffix[0] == "*":
        # The wildcard would also match the tenant label, so ("*", "docs") would list ("docs",).
        raise RequestFieldError("suffix[0]", "a leading '*' wildcard is not supported")
    async with _database("list namespaces"):
        found = await _store(gateway).alist_namespaces(
            prefix=(store_tenant_label(identity), *prefix),
            suffix=suffix,
            max_depth=None if body.max_depth is None else body.max_depth + 1,
            limit=body.limit,
            offset=body.offset,
        )
    return JSONResponse({"namespaces": [list(ns[1:]) for ns in found]})
