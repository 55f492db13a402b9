"""The gateway in-process for the injection and isolation areas: config, identities, client.

`open_app` runs the app's lifespan and yields an httpx client talking to it through
`httpx.ASGITransport` (no socket), so a campaign of thousands of requests stays fast while
every request still crosses the real middleware, routing, auth and storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from foldwise.config import FoldwiseConfig, parse_config
from foldwise.gateway import create_app

__all__ = ["api_key", "gateway_config", "headers_for", "open_app"]


def api_key(user: str) -> str:
    """The API key of `user` in these campaigns."""
    return f"key-{user}"


def headers_for(user: str) -> dict[str, str]:
    """Request headers authenticating as `user`."""
    return {"x-api-key": api_key(user)}


def gateway_config(
    workdir: Path, users: Sequence[str], extra: dict[str, Any] | None = None
) -> FoldwiseConfig:
    """A gateway config on SQLite under `workdir`, one API key per user, plus `extra` sections."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{workdir / 'gateway.db'}"},
        "offload": {"root": str(workdir / "artifacts")},
        "gateway": {"auth": {"api_keys": [{"key": api_key(u), "user": u} for u in users]}},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_config(data)


@asynccontextmanager
async def open_app(
    config: FoldwiseConfig, factory: Any = None, **options: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    """Run the app's lifespan; yield a client whose requests go straight to the app."""
    app = create_app(config, agent_factory=factory, **options)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", timeout=120
        ) as client:
            yield client, app
