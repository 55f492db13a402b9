"""HTTP hygiene around the routes: Host-header validation, CORS, JSON whatever the content type.

- `HostMiddleware` answers 400 to a `Host` header not in `gateway.allowed_hosts` (default: the
  loopback names, the configured bind host and the address the connection arrived on), so a
  DNS-rebinding web page cannot drive a gateway bound to 127.0.0.1.
- `add_cors` installs Starlette's `CORSMiddleware` for `gateway.cors_origins` (off when empty),
  exposing the headers the LangGraph SDKs read.
- `JsonBodyMiddleware` treats a body sent as `text/plain` (what browser `fetch` and Next.js
  passthroughs send without an explicit type) as JSON: FastAPI only parses `application/json`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from foldwise.config import GatewayConfig
from foldwise.gateway._serde import JSONResponse

__all__ = [
    "EXPOSED_HEADERS",
    "CrossSiteMiddleware",
    "HostMiddleware",
    "JsonBodyMiddleware",
    "add_cors",
    "host_name",
]

logger = logging.getLogger(__name__)

EXPOSED_HEADERS = ("Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next")
"""Response headers a browser client may read (run locations, pagination)."""

_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_ANY_ADDRESS = ("", "0.0.0.0", "::")


def host_name(header: str) -> str:
    """The host part of a `Host` header, lower-cased: no port, no IPv6 brackets.

    A bracketed literal followed by anything but a port (`[::1].evil.example`) is returned
    whole, so it matches no allowed name.
    """
    header = header.strip().lower()
    if header.startswith("["):
        literal, _, rest = header[1:].partition("]")
        if rest and not (rest[0] == ":" and rest[1:].isdigit()):
            return header
        return literal
    if header.count(":") == 1:
        return header.partition(":")[0]
    return header


class HostMiddleware:
    """Pure ASGI middleware: 400 `{"detail": ...}` for a `Host` header that is not allowed.

    Args:
        app: The wrapped application.
        config: The gateway section (`allowed_hosts`, `host`).
    """

    def __init__(self, app: ASGIApp, *, config: GatewayConfig) -> None:
        self.app = app
        names = config.allowed_hosts
        if names is None:
            names = [*_LOOPBACK, config.host]
        self.any = "*" in names
        self.exact = {host_name(n) for n in names if not n.startswith("*")} - set(_ANY_ADDRESS)
        self.suffixes = tuple(n[1:].lower() for n in names if n.startswith("*."))

    def allows(self, host: str, server: str | None) -> bool:
        """Whether `host` (a `Host` header's name) may reach this gateway."""
        if self.any:
            return True
        if not host:
            return False
        if host in self.exact or host.endswith(self.suffixes):
            return True
        # The address the client connected to, as the server saw it: an IP literal that the
        # client typed itself, which a rebinding attack cannot produce.
        return server is not None and host == server.lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the `Host` header of HTTP requests."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = ""
        for name, value in scope.get("headers", ()):
            if name == b"host":
                header = value.decode("latin-1")
                break
        server = scope.get("server")
        host = host_name(header)
        if not self.allows(host, host_name(str(server[0])) if server else None):
            logger.warning("refused a request for Host %r (not in gateway.allowed_hosts)", header)
            detail = f"invalid Host header {header!r}: add it to gateway.allowed_hosts"
            await JSONResponse({"detail": detail}, status_code=400)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def add_cors(app: FastAPI, origins: list[str]) -> None:
    """Allow browser calls from `origins` (no-op when empty): any method, any request header."""
    if not origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["*"],
        allow_headers=["*"],
        expose_headers=list(EXPOSED_HEADERS),
    )


class CrossSiteMiddleware:
    """Pure ASGI middleware: refuse requests a browser sends from another site (403).

    CORS only stops a page from *reading* a response; a cross-site `POST` with a "simple"
    content type (`text/plain`, a form) is still delivered. Because every body is read as JSON
    here, such a request could start runs on a gateway without keys. So a request whose
    `Origin` is neither one of `gateway.cors_origins` nor the gateway itself, or that the
    browser marks `Sec-Fetch-Site: cross-site`, is refused before any route runs. Clients that
    are not browsers (the SDKs, server-side passthroughs) send no `Origin` and are unaffected.

    Args:
        app: The wrapped application.
        origins: The allowed origins (`gateway.cors_origins`).
    """

    def __init__(self, app: ASGIApp, *, origins: list[str]) -> None:
        self.app = app
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)

    def _foreign(self, headers: dict[bytes, bytes]) -> str | None:
        origin = headers.get(b"origin", b"").decode("latin-1").strip().rstrip("/").lower()
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
        if origin and origin != "null":
            if origin in self.origins or "*" in self.origins:
                return None
            host = headers.get(b"host", b"").decode("latin-1").strip().lower()
            if origin.partition("://")[2] == host:
                return None  # the gateway's own pages
            return origin
        if origin == "null" or site == "cross-site":
            return origin or "a cross-site page"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 403 to a cross-site browser request; pass everything else on."""
        if scope["type"] == "http":
            foreign = self._foreign(dict(scope.get("headers", ())))
            if foreign is not None:
                response = JSONResponse(
                    {
                        "detail": f"cross-site request from {foreign} refused; allow the "
                        "origin with gateway.cors_origins"
                    },
                    status_code=403,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _is_json(content_type: bytes) -> bool:
    mime = content_type.split(b";", 1)[0].strip().lower()
    return mime == b"application/json" or mime.endswith(b"+json")


class JsonBodyMiddleware:
    """Pure ASGI middleware: a request body is parsed as JSON whatever its declared type.

    Every route of the gateway takes JSON, so a `text/plain` (or any other) content type is
    rewritten to `application/json`; a body that is not JSON still gets the usual 422.

    Args:
        app: The wrapped application.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Rewrite a non-JSON `Content-Type` of an HTTP request."""
        if scope["type"] == "http":
            headers = scope.get("headers", ())
            if any(n == b"content-type" and not _is_json(v) for n, v in headers):
                rewritten = [(n, v) for n, v in headers if n != b"content-type"]
                rewritten.append((b"content-type", b"application/json"))
                scope = {**scope, "headers": rewritten}
        await self.app(scope, receive, send)
