"""JSON for the wire: state values, messages, receipts, snapshots; SSE frames.

LangGraph state holds LangChain messages, pydantic models, dataclasses, datetimes and
LangGraph's own types. `jsonable` turns all of them into plain JSON values the way LangGraph
Server does (messages as their `model_dump()`), so the official SDK reads them unchanged.
Text is always valid UTF-8 on the wire: lone surrogates become U+FFFD, non-finite floats `null`.

Encoding is orjson's (a long thread's state is mostly messages: walking each one in Python
cost 17 ms per answer at 400 messages, orjson about 1 ms), with `_shallow` converting what it
does not know one level at a time. What orjson refuses (a lone surrogate, an integer beyond 64
bits, a non-string key, nesting past its limit of 254 levels) takes the pure-Python path, whose
result is the same JSON; nesting past `_MAX_DEPTH` levels is cut to ``null`` only on that path.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

import orjson
from langchain_core.messages import BaseMessage
from pydantic import BaseModel
from starlette.responses import JSONResponse as _StarletteJSONResponse

__all__ = ["JSONResponse", "dumps", "jsonable", "sse_frame"]

_MAX_DEPTH = 200
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""orjson leaves out a dataclass's ``_private`` fields and writes datetimes its own way: both
go through `_shallow` instead, as on the pure-Python path."""


def _clean_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Pair up valid surrogate pairs, replace lone ones.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def jsonable(value: Any) -> Any:
    """Convert a state value (messages, models, dataclasses, ...) to plain JSON values."""
    if value is None or isinstance(value, bool | int | str):
        return _plain(value)
    try:
        return orjson.loads(orjson.dumps(value, default=_shallow, option=_OPTIONS))
    except (orjson.JSONEncodeError, TypeError):
        return _plain(value)


def _shallow(value: Any) -> Any:
    """orjson's `default`: one level of `_plain` (orjson encodes what this returns)."""
    if isinstance(value, BaseMessage):
        return value.model_dump()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple | set | frozenset):  # subclasses (named tuples)
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    converted = _scalar(value)
    if converted is not _UNKNOWN:
        return converted
    if hasattr(value, "_asdict"):
        return value._asdict()
    if hasattr(value, "value") and type(value).__name__ in ("Overwrite", "Interrupt"):
        return _marker(value, lambda inner: inner)
    return repr(value)


_UNKNOWN = object()


def _scalar(value: Any) -> Any:
    """A datetime, duration, id, path, enum or bytes value as JSON; `_UNKNOWN` otherwise."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, UUID | PurePath):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return _UNKNOWN


def _marker(value: Any, convert: Any) -> dict[str, Any]:
    """LangGraph's `Overwrite` / `Interrupt`: its value (and id)."""
    out: dict[str, Any] = {"value": convert(value.value)}
    if getattr(value, "id", None) is not None:
        out["id"] = str(value.id)
    return out


def _key(key: Any) -> str:
    """A mapping key as JSON (and LangGraph Server) write it: True is "true", None "null"."""
    if isinstance(key, str):
        return _clean_text(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return _clean_text(str(key))


def _plain(value: Any, _depth: int = 0) -> Any:
    """`jsonable` in pure Python (what orjson refuses): the same JSON, surrogates replaced."""
    if _depth > _MAX_DEPTH:
        return None
    depth = _depth + 1
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, BaseMessage | BaseModel):
        return _plain(_shallow(value), depth)
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth) for v in value]
    if isinstance(value, Mapping):
        return {_key(k): _plain(v, depth) for k, v in value.items()}
    converted = _scalar(value)
    if converted is not _UNKNOWN:
        # A dataclass's fields are one level down, as a mapping's items (not two: the dict
        # `_scalar` makes of it is no level of its own); an enum's value is one level down.
        return _plain(converted, depth if isinstance(value, Enum) else _depth)
    if hasattr(value, "_asdict"):  # named tuples (e.g. LangGraph's PregelTask)
        return _plain(value._asdict(), depth)
    if hasattr(value, "value") and type(value).__name__ in ("Overwrite", "Interrupt"):
        return _marker(value, lambda inner: _plain(inner, depth))
    return _clean_text(repr(value))


def dumps(value: Any) -> bytes:
    """Encode a state value (see `jsonable`) as compact UTF-8 JSON."""
    try:
        return orjson.dumps(value, default=_shallow, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(
            _plain(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode("utf-8")


class JSONResponse(_StarletteJSONResponse):
    """A JSON response that renders any state value (see `jsonable`) as valid UTF-8 JSON."""

    def render(self, content: Any) -> bytes:
        """Encode `content`."""
        return dumps(content)


def sse_frame(event: str, data: Any, *, event_id: str | None = None) -> bytes:
    """One Server-Sent Events frame: ``event: <name>`` and one ``data:`` line of JSON."""
    head = f"event: {event}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return head.encode("utf-8") + b"data: " + dumps(data) + b"\n\n"
