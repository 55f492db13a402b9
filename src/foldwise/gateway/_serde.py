"""JSON for the wire: state values, messages, receipts, snapshots; SSE frames.

LangGraph state holds LangChain messages, pydantic models, dataclasses, datetimes and
LangGraph's own types. `jsonable` turns all of them into plain JSON values the way LangGraph
Server does (messages as their `model_dump()`), so the official SDK reads them unchanged.
Text is always valid UTF-8 on the wire: lone surrogates become U+FFFD, non-finite floats `null`.
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

from langchain_core.messages import BaseMessage
from pydantic import BaseModel
from starlette.responses import JSONResponse as _StarletteJSONResponse

__all__ = ["JSONResponse", "dumps", "jsonable", "sse_frame"]

_MAX_DEPTH = 200


def _clean_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Pair up valid surrogate pairs, replace lone ones.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def jsonable(value: Any, _depth: int = 0) -> Any:
    """Convert a state value (messages, models, dataclasses, ...) to plain JSON values."""
    if _depth > _MAX_DEPTH:
        return None
    depth = _depth + 1
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, BaseMessage):
        return jsonable(value.model_dump(), depth)
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"), depth)
    if isinstance(value, Mapping):
        return {_clean_text(str(k)): jsonable(v, depth) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, depth) for v in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, UUID | PurePath):
        return str(value)
    if isinstance(value, Enum):
        return jsonable(value.value, depth)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), depth) for f in dataclasses.fields(value)}
    if hasattr(value, "_asdict"):  # named tuples (e.g. LangGraph's PregelTask)
        return jsonable(value._asdict(), depth)
    if hasattr(value, "value") and type(value).__name__ in ("Overwrite", "Interrupt"):
        out: dict[str, Any] = {"value": jsonable(value.value, depth)}
        if getattr(value, "id", None) is not None:
            out["id"] = str(value.id)
        return out
    return _clean_text(repr(value))


def dumps(value: Any) -> bytes:
    """Encode an already-`jsonable` value (or a plain one) as compact UTF-8 JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
            "utf-8"
        )
    except (ValueError, TypeError, UnicodeEncodeError):
        return json.dumps(
            jsonable(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
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
