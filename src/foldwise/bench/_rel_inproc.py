"""The injection and isolation areas' gateway config and identities (one API key per user).

The areas run the app in-process with `foldwise.bench._serve.open_app` (an httpx client
through `httpx.ASGITransport`, no socket), so a campaign of thousands of requests stays fast
while every request still crosses the real middleware, routing, auth and storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from foldwise.config import FoldwiseConfig, parse_config

__all__ = ["INPROC_URL", "api_key", "gateway_config", "headers_for"]

INPROC_URL = "http://127.0.0.1"
"""The base URL of the areas' in-process client (a loopback host, as a local browser sends)."""


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
