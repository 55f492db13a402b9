"""`GET /ui` and `GET /ui/{asset}`: the web page that shows what the model saw.

The page is plain ES modules and CSS shipped as package data in `foldwise/gateway/ui/` (no
build step; see docs/ui.md). Every asset is read once, at import, into a fixed table keyed by
its path relative to that directory; a request only ever looks a name up in that table, so no
part of a URL reaches the filesystem (`/ui/../x`, `/ui/%2e%2e/x` and unknown names are 404).

The assets are public (`foldwise.gateway._auth.is_public_path`): they hold no data. Every API
call the page makes carries the key. Responses carry a strict Content-Security-Policy (same
origin only, no inline script or style), `nosniff`, `no-referrer`, and an ETag so a reload
revalidates instead of downloading again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Annotated

from fastapi import APIRouter, Header, Path, Response

from foldwise.gateway._serde import JSONResponse

__all__ = ["ASSETS", "CONTENT_SECURITY_POLICY", "UI_HEADERS", "UiAsset", "router"]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""Same-origin everything; no inline script or style; the page cannot be framed."""

UI_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""Headers of every `/ui` response."""

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
"""The asset types served; files of any other type in the directory are not."""

_MAX_DEPTH = 3


@dataclass(frozen=True)
class UiAsset:
    """One served file: its bytes, content type and ETag."""

    body: bytes
    content_type: str
    etag: str


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _collect(folder: Traversable, prefix: str, depth: int, into: dict[str, UiAsset]) -> None:
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith((".", "_")):
            continue
        if entry.is_dir():
            if depth < _MAX_DEPTH:
                _collect(entry, f"{prefix}{name}/", depth + 1, into)
            continue
        content_type = _CONTENT_TYPES.get(_suffix(name))
        if content_type is None:
            continue
        body = entry.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        into[prefix + name] = UiAsset(body, content_type, etag)


def _load_assets() -> dict[str, UiAsset]:
    folder = files("foldwise.gateway") / "ui"
    found: dict[str, UiAsset] = {}
    if folder.is_dir():
        _collect(folder, "", 0, found)
    return found


ASSETS = _load_assets()
"""Every servable asset by its path under `ui/` (`index.html`, `views/threads.js`, ...)."""

router = APIRouter(tags=["ui"], include_in_schema=False)


def _answer(name: str, if_none_match: str | None) -> Response:
    asset = ASSETS.get(name)
    if asset is None:
        return JSONResponse({"detail": f"no such page asset {name!r}"}, status_code=404)
    headers = {**UI_HEADERS, "ETag": asset.etag}
    if if_none_match is not None and asset.etag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


IfNoneMatch = Annotated[str | None, Header(alias="if-none-match")]


@router.get("/ui")
async def ui_page(if_none_match: IfNoneMatch = None) -> Response:
    """The page (`index.html`); the views are chosen by the URL's hash."""
    return _answer("index.html", if_none_match)


@router.get("/ui/{asset:path}")
async def ui_asset(
    asset: Annotated[str, Path(max_length=200)], if_none_match: IfNoneMatch = None
) -> Response:
    """One asset of the page, by its name in the fixed table (`/ui/` is the page itself)."""
    return _answer(asset or "index.html", if_none_match)
