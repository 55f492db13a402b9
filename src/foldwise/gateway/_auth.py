"""Who is calling: API keys, a pluggable authenticator, and the identity every thread is owned by.

`AuthMiddleware` resolves the caller's identity once per request and leaves it in the ASGI
scope's state; routes read it with `request_identity` (via `IdentityDep` in `_deps`). Keys come
from `gateway.auth.api_keys` and are sent as `x-api-key` or `Authorization: Bearer <key>`, as
the LangGraph SDKs do; they are compared in constant time against every configured key and
never logged. `gateway.auth.authenticator` names a callable (sync or async) that receives the
Starlette `Request` (headers only: the body is not read) and returns an identity or `None`;
JWT/OIDC setups plug in here. Without keys or authenticator every request is `LOCAL_IDENTITY`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import logging
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from foldwise.config import GatewayAuthConfig
from foldwise.errors import ConfigError
from foldwise.gateway._serde import JSONResponse
from foldwise.models import import_object

__all__ = [
    "LOCAL_IDENTITY",
    "PUBLIC_PATHS",
    "AuthMiddleware",
    "Authenticator",
    "is_public_path",
    "request_identity",
]

logger = logging.getLogger(__name__)

_MAX_IDENTITY = 256
"""Longest identity an authenticator may return (thread owners are stored with it)."""

LOCAL_IDENTITY = ""
"""The identity of every request when no auth is configured (no authenticated user has it)."""

PUBLIC_PATHS = frozenset({"/health", "/ok", "/info"})
"""Paths answered without credentials: liveness and server info, no thread data."""

PUBLIC_PAGE = "/ui"
"""The web page and its assets (`/ui`, `/ui/...`): static files, no data; its API calls
carry the key like any client's."""


def is_public_path(path: str) -> bool:
    """Whether `path` is answered without credentials (`PUBLIC_PATHS` and the web page)."""
    return path in PUBLIC_PATHS or path == PUBLIC_PAGE or path.startswith(PUBLIC_PAGE + "/")


_STATE_KEY = "foldwise_identity"


def _digest(secret: str) -> bytes:
    # Hashing first gives every comparison the same length, so timing says nothing about it.
    return hashlib.sha256(secret.encode()).digest()


class Authenticator:
    """Turns a request's credentials into an identity, per `gateway.auth`.

    Args:
        config: The `gateway.auth` section.

    Raises:
        ConfigError: The authenticator path cannot be imported or is not callable.
    """

    def __init__(self, config: GatewayAuthConfig) -> None:
        self.enabled = config.enabled
        self._keys = [(_digest(k.key.get_secret_value()), k.user) for k in config.api_keys]
        self._hook: Callable[[Request], Any] | None = None
        if config.authenticator is not None:
            hook = import_object(config.authenticator, what="gateway.auth.authenticator")
            if not callable(hook):
                raise ConfigError(
                    f"{config.authenticator!r} is not callable", key="gateway.auth.authenticator"
                )
            self._hook = hook

    def _match_key(self, candidate: str) -> str | None:
        digest = _digest(candidate)
        user = None
        for key, owner in self._keys:  # no early exit: every key is compared
            if hmac.compare_digest(digest, key) and user is None:
                user = owner
        return user

    async def _call_hook(self, request: Request) -> str | None:
        assert self._hook is not None
        if inspect.iscoroutinefunction(self._hook):
            result = await self._hook(request)
        else:  # a sync hook may block (a JWKS fetch): keep it off the event loop
            result = await asyncio.to_thread(self._hook, request)
        if inspect.isawaitable(result):
            result = await result
        if result is not None and not isinstance(result, str):
            raise TypeError(f"the authenticator returned {type(result).__name__}, not str | None")
        if result and (len(result) > _MAX_IDENTITY or not result.isprintable()):
            raise ValueError(
                f"the authenticator returned an identity that is not 1-{_MAX_IDENTITY} printable "
                "characters"
            )
        return result or None

    async def identify(self, request: Request) -> str | None:
        """The caller's identity, or `None` when the request carries no valid credentials.

        Raises:
            HTTPException: Raised by the authenticator hook to answer with its own status.
        """
        if not self.enabled:
            return LOCAL_IDENTITY
        for candidate in _credentials(request):
            user = self._match_key(candidate)
            if user is not None:
                return user
        if self._hook is None:
            return None
        return await self._call_hook(request)


def _credentials(request: Request) -> list[str]:
    found = []
    api_key = request.headers.get("x-api-key")
    if api_key:
        found.append(api_key.strip())
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        found.append(token.strip())
    return found


def _unauthorized(detail: str, status: int = 401) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class AuthMiddleware:
    """Pure ASGI middleware: resolve the identity, or answer 401 `{"detail": ...}`.

    Public paths (`PUBLIC_PATHS`, the page under `/ui`) and `OPTIONS` requests (CORS
    preflights, answered by the CORS middleware outside this one) pass without credentials.

    Args:
        app: The wrapped application.
        authenticator: Resolves identities.
    """

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate HTTP requests; pass everything else through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if is_public_path(str(scope.get("path", ""))) or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.authenticator.identify(Request(scope))
        except HTTPException as error:  # the hook's own answer (e.g. 403 for a revoked token)
            await _unauthorized(str(error.detail), error.status_code)(scope, receive, send)
            return
        except Exception as error:  # fail closed; log the error's type only (its text may
            # quote the credentials the hook was given)
            logger.warning(
                "authenticator failed on %s %s: %s",
                scope.get("method"),
                scope.get("path"),
                type(error).__name__,
            )
            identity = None
        if identity is None:
            detail = "authentication required: send an API key as x-api-key or Bearer token"
            await _unauthorized(detail)(scope, receive, send)
            return
        scope.setdefault("state", {})[_STATE_KEY] = identity
        await self.app(scope, receive, send)


async def request_identity(request: Request) -> str:
    """The identity `AuthMiddleware` resolved for this request.

    Raises:
        HTTPException: 401 when none was resolved (fail closed, e.g. on a public path).
    """
    identity = request.scope.get("state", {}).get(_STATE_KEY)
    if not isinstance(identity, str):
        raise HTTPException(status_code=401, detail="authentication required")
    return identity
