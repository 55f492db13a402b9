"""Gateway errors and the one table that maps every error to an HTTP status.

The gateway raises foldwise's own exceptions (and the few below) and lets the handlers
installed by `install_error_handlers` turn them into `{"detail": ...}` responses. The status
of each class is decided in `STATUS_BY_ERROR` and nowhere else.

```
FoldwiseError
├── UsageError                       422 (unless listed below)
│   ├── RequestFieldError            a request field is invalid (names the field)
│   └── InvalidIdError               a malformed thread / run id
└── FoldwiseRuntimeError             500 (unless listed below)
    ├── ThreadNotFoundError          404
    ├── AssistantNotFoundError       404 (this module)
    ├── RunNotFoundError             404 (this module)
    ├── FactNotFoundError            404: no such memory fact in the caller's namespace
    ├── MemoryDisabledError          404 (this module): `memory.enabled` is off
    ├── RevisionConflictError        409: a memory fact changed since it was read
    ├── ThreadBusyError              409, with Retry-After when known
    │   └── BusyError                (this module) carries the Retry-After hint
    ├── LeaseLostError               409 (this module): another worker took the thread
    ├── SearchesBusyError            429 (this module): every regex search slot is taken
    ├── GatewayClosingError          503 (this module): shutting down, no new work
    ├── RunInterruptedError          503 (this module): the run was cancelled
    ├── RunFailedError               500 (this module): the agent raised
    ├── CompactionDisabledError      409
    ├── SummaryGenerationError       502: every summarizer failed; the thread is unchanged
    ├── ModelConstructionError       502
    ├── ModelResponseError           502: the model's answer was cut off; nothing was kept
    └── StorageError                 503
PayloadTooLargeError (HTTPException) 413: raised while the body is still being read
```
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldwise._dotted import dotted_key
from foldwise._telemetry import add
from foldwise.errors import (
    ArtifactIdError,
    ArtifactNotFoundError,
    CompactionDisabledError,
    FactNotFoundError,
    FoldwiseError,
    FoldwiseRuntimeError,
    ModelConstructionError,
    ModelResponseError,
    RevisionConflictError,
    StorageError,
    SummaryGenerationError,
    ThreadBusyError,
    ThreadNotFoundError,
    UsageError,
)
from foldwise.gateway._serde import JSONResponse
from foldwise.gateway.storage import InvalidIdError, RunExistsError, ThreadExistsError

__all__ = [
    "STATUS_BY_ERROR",
    "AssistantNotFoundError",
    "BusyError",
    "ErrorGuardMiddleware",
    "GatewayClosingError",
    "LeaseLostError",
    "MemoryDisabledError",
    "PayloadTooLargeError",
    "RequestFieldError",
    "RunFailedError",
    "RunInterruptedError",
    "RunNotFoundError",
    "SearchesBusyError",
    "error_response",
    "install_error_handlers",
    "status_for",
]

logger = logging.getLogger(__name__)


class RequestFieldError(UsageError):
    """A field of the request is invalid; the message starts with the field's dotted path.

    Attributes:
        field: Dotted path of the field, e.g. ``input.messages[0].role``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class AssistantNotFoundError(FoldwiseRuntimeError):
    """The `assistant_id` names no agent of this gateway."""

    def __init__(self, assistant_id: str, known: Sequence[str]) -> None:
        self.assistant_id = assistant_id
        super().__init__(
            f"assistant {assistant_id!r} not found; this gateway serves: {', '.join(known)}"
        )


class RunNotFoundError(FoldwiseRuntimeError):
    """No run with this id on this thread."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r} not found")


class MemoryDisabledError(FoldwiseRuntimeError):
    """A memory route was called on a gateway whose `memory.enabled` is off."""

    def __init__(self) -> None:
        super().__init__(
            "long-term memory is not enabled on this gateway (set memory.enabled: true)"
        )


class BusyError(ThreadBusyError):
    """`ThreadBusyError` with a `Retry-After` hint (seconds) for the 409 response."""

    def __init__(self, thread_id: str, what: str, retry_after: int | None) -> None:
        super().__init__(thread_id, what)
        self.retry_after = retry_after


class LeaseLostError(FoldwiseRuntimeError):
    """The thread's lease expired and another worker took it over; the operation stopped."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        lost = "the lease on the thread was lost (another worker took it over)"
        super().__init__(f"thread {thread_id!r}: {lost}; the operation was stopped")


class SearchesBusyError(FoldwiseRuntimeError):
    """Every slot for regex artifact searches stayed taken; retry after `retry_after` s."""

    retry_after = 2

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"too many regex searches at once: this gateway runs at most {limit} regex "
            "artifact searches at a time (each may take its whole time budget); retry shortly, "
            "or search for a plain substring (regex=false), which is not limited"
        )


class GatewayClosingError(FoldwiseRuntimeError):
    """The gateway is shutting down and accepts no new runs or compactions."""

    retry_after = 1

    def __init__(self) -> None:
        super().__init__("the gateway is shutting down; retry shortly (or on another worker)")


_TASK_NOTE = re.compile(r"During task with name '([^']{1,100})'")


def _failed_step(error: BaseException) -> str | None:
    """The graph step (`model`, `tools`, ...) LangGraph noted on the error, if any."""
    for note in getattr(error, "__notes__", None) or ():
        match = _TASK_NOTE.search(str(note))
        if match:
            return match.group(1)
    return None


class RunFailedError(FoldwiseRuntimeError):
    """An agent run raised; the message names the run, the step that raised and the error.

    The step (LangGraph's task name: `model` for the model call, `tools` for a tool) tells a
    provider's malformed answer (`in step 'model': TypeError: ...`) from a tool's failure.
    """

    def __init__(self, run_id: str, error: BaseException) -> None:
        self.run_id = run_id
        text = " ".join(str(error).split())
        if len(text) > 500:
            text = text[:497] + "..."
        step = _failed_step(error)
        where = f" in step {step!r}" if step else ""
        super().__init__(f"run {run_id} failed{where}: {type(error).__name__}: {text}")


class RunInterruptedError(FoldwiseRuntimeError):
    """A run was cancelled before it finished (shutdown or client request)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id} was interrupted before it finished; the thread keeps every step "
            "completed so far"
        )


class PayloadTooLargeError(HTTPException):
    """The request body is larger than `gateway.max_body_bytes` (raised before parsing)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            status_code=413,
            detail=f"request body too large: the limit is {limit} bytes (gateway.max_body_bytes)",
        )


# The one place that decides the status of an error: the first matching class wins, so the
# more specific classes come first.
STATUS_BY_ERROR: tuple[tuple[type[BaseException], int], ...] = (
    (InvalidIdError, 422),
    (RequestFieldError, 422),
    (ArtifactIdError, 422),
    (UsageError, 422),
    (ThreadNotFoundError, 404),
    (AssistantNotFoundError, 404),
    (RunNotFoundError, 404),
    (ArtifactNotFoundError, 404),
    (FactNotFoundError, 404),
    (MemoryDisabledError, 404),
    (ThreadBusyError, 409),
    (LeaseLostError, 409),
    (CompactionDisabledError, 409),
    (ThreadExistsError, 409),
    (RunExistsError, 409),
    (RevisionConflictError, 409),
    (SearchesBusyError, 429),
    (SummaryGenerationError, 502),
    (ModelConstructionError, 502),
    (ModelResponseError, 502),
    (StorageError, 503),
    (GatewayClosingError, 503),
    (RunInterruptedError, 503),
    (FoldwiseRuntimeError, 500),
)


def status_for(error: BaseException) -> int:
    """The HTTP status of an error (500 for anything not in `STATUS_BY_ERROR`)."""
    for cls, status in STATUS_BY_ERROR:
        if isinstance(error, cls):
            return status
    return 500


def _headers_for(error: BaseException) -> dict[str, str]:
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, int) and retry_after > 0:
        return {"Retry-After": str(retry_after)}
    return {}


def error_response(error: BaseException) -> JSONResponse:
    """The JSON response for a foldwise error: its status, `{"detail": message}`, headers."""
    status = status_for(error)
    if status >= 500:
        logger.error("request failed with %d: %s: %s", status, type(error).__name__, error)
    detail = str(error) if status < 500 or isinstance(error, FoldwiseError) else "internal error"
    return JSONResponse({"detail": detail}, status_code=status, headers=_headers_for(error))


def _validation_detail(error: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    lines: list[str] = []
    items: list[dict[str, Any]] = []
    for item in error.errors():
        loc = list(item.get("loc") or ())
        # FastAPI prefixes the source; keep it only for the path and the query string.
        if loc and loc[0] == "body":
            loc = loc[1:]
        message = str(item.get("msg", "invalid value"))
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if item.get("type") == "json_invalid":
            loc = []
            message = f"invalid JSON: {(item.get('ctx') or {}).get('error', 'decode error')}"
        where = dotted_key(loc) or "body"
        lines.append(f"{where}: {message}")
        items.append(
            {
                "loc": [str(p) if not isinstance(p, int) else p for p in loc],
                "msg": message,
                "type": str(item.get("type", "")),
            }
        )
    return "; ".join(lines) or "invalid request", items


async def _on_foldwise_error(request: Request, error: Exception) -> Response:
    if isinstance(error, ThreadBusyError | LeaseLostError):
        add("foldwise.busy_responses", 1, {"error.type": type(error).__name__})
    return error_response(error)


async def _on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    detail, items = _validation_detail(error)
    return JSONResponse({"detail": detail, "errors": items}, status_code=422)


_UNPARSED_BODY = "There was an error parsing the body"
"""FastAPI's 400 when decoding the body raised something other than a JSON syntax error."""


def _unparsed_body_detail(cause: BaseException | None) -> str:
    """Why a body could not be read as JSON, in the client's terms (no exception names)."""
    if isinstance(cause, RecursionError):
        why = "it is nested too deeply"
    elif isinstance(cause, UnicodeError):
        why = "it is not valid UTF-8"
    elif isinstance(cause, ValueError) and "digits" in str(cause):
        why = "a number in it has too many digits"
    else:
        why = "it is not valid JSON"
    return f"body: could not be parsed as JSON: {why}"


async def _on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    detail = error.detail
    if error.status_code == 400 and detail == _UNPARSED_BODY:
        detail = _unparsed_body_detail(error.__cause__)
    return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)


class ErrorGuardMiddleware:
    """Pure ASGI middleware: an unexpected exception becomes a logged JSON 500, never a reset.

    Starlette's own last-resort handler answers 500 but then re-raises, and the server may drop
    the connection; this one logs the traceback (with the path) and ends the response cleanly.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; turn an escaped exception into a 500 (or end a started response)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        ended = False

        async def tracking_send(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            logger.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                response = JSONResponse({"detail": "internal error"}, status_code=500)
                await response(scope, receive, send)
            elif not ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that render every error as `{"detail": ...}` with its status."""
    app.add_exception_handler(FoldwiseError, _on_foldwise_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    # Starlette's class: FastAPI raises it too (405, an unparseable body), not only its own.
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
