"""`BodyLimitMiddleware`: refuse request bodies above `gateway.max_body_bytes` before parsing.

Starlette and FastAPI have no body limit. This pure ASGI middleware answers 413 at once when
`Content-Length` announces too much, and counts the bytes of bodies sent without one (chunked
encoding): once the count passes the limit, reading the body raises `PayloadTooLargeError`,
which FastAPI re-raises unchanged and renders as 413. Nothing oversized is ever buffered.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldwise.gateway._errors import PayloadTooLargeError
from foldwise.gateway._serde import dumps

__all__ = ["BodyLimitMiddleware"]


class BodyLimitMiddleware:
    """Pure ASGI middleware enforcing a maximum request body size.

    Args:
        app: The wrapped application.
        max_bytes: The largest body accepted.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send, status: int, detail: str) -> None:
        body = dumps({"detail": detail})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the announced size, then count what is actually received."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    await self._reject(send, 400, "invalid Content-Length header")
                    return
                if announced > limit:
                    await self._reject(send, 413, PayloadTooLargeError(limit).detail)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLargeError(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except PayloadTooLargeError as error:
            # Raised outside FastAPI's request handling (e.g. by another middleware).
            if started:
                raise
            await self._reject(send, 413, str(error.detail))
