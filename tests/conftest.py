"""Suite-wide fixtures: no real network model calls, an isolated environment."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway import drop_schema, postgres_url

_ALLOWED_HOSTS = {"127.0.0.1", "localhost", "::1", "testserver"}


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Remove provider keys and foldwise settings so tests never see the developer's env."""
    for key in list(os.environ):
        if key.startswith(("OPENAI_", "ANTHROPIC_", "FOLDWISE_", "LANGSMITH_", "LANGCHAIN_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken-cache")))


@pytest.fixture(autouse=True)
def _isolate_cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> None:
    """Run each test in its own directory, so default relative paths (.foldwise/) stay there."""
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse outbound connections to anything but loopback."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _check(address: object) -> None:
        host = address[0] if isinstance(address, tuple) and address else None
        if isinstance(host, str) and host not in _ALLOWED_HOSTS and not host.startswith("127."):
            raise RuntimeError(f"network access to {host!r} is blocked in tests")

    def guarded_connect(self: socket.socket, address: object) -> None:
        _check(address)
        real_connect(self, address)  # type: ignore[arg-type]

    def guarded_connect_ex(self: socket.socket, address: object) -> int:
        _check(address)
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The gateway storage URL of each backend: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db' / 'gateway.db'}"
        return
    url, dsn, schema = postgres_url()
    try:
        yield url
    finally:
        drop_schema(dsn, schema)
