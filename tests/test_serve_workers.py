"""`foldwise serve --workers N`: a database the workers could not share is refused; `--host`
reaches every worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from foldwise.bench._serve import child_env, free_port
from foldwise.cli import app
from foldwise.gateway import app_from_env

_MODEL = {"name": "m", "use": "foldwise.testing:ScriptedChatModel"}


def _config(tmp_path: Path, **sections: object) -> str:
    path = tmp_path / "foldwise.yaml"
    path.write_text(yaml.safe_dump({"models": [_MODEL], **sections}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        ({"storage": {"url": "memory://"}}, "storage.url"),
        ({"storage": {"url": "sqlite:///:memory:"}}, "storage.url"),
        (
            {
                "storage": {"url": "sqlite:///data/gw.db"},
                "memory": {"enabled": True, "url": "memory://"},
            },
            "memory.url",
        ),
    ],
)
def test_workers_refuse_a_process_private_database(
    tmp_path: Path, sections: dict[str, object], key: str
) -> None:
    config = _config(tmp_path, **sections)
    result = CliRunner().invoke(app, ["serve", "--config", config, "--workers", "2"])
    assert result.exit_code == 2, result.output
    assert "--workers 2" in result.output and f"{key} is" in result.output
    assert "postgresql://" in result.output


async def _status_for_host(host: str) -> int:
    """`GET /ok` with `Host: <host>` on a connection that arrived at 127.0.0.1."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/ok",
        "raw_path": b"/ok",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", f"{host}:8420".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8420),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app_from_env()(scope, receive, send)
    return int(sent[0]["status"])


async def test_worker_processes_accept_the_host_serve_was_bound_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --host H --workers N`: each worker builds its app from the environment."""
    monkeypatch.setenv("FOLDWISE_CONFIG", _config(tmp_path, storage={"url": "memory://"}))
    monkeypatch.delenv("FOLDWISE_GATEWAY_HOST", raising=False)
    assert await _status_for_host("gw.internal") == 400  # not the configured host
    monkeypatch.setenv("FOLDWISE_GATEWAY_HOST", "gw.internal")
    assert await _status_for_host("gw.internal") == 200


def test_workers_that_cannot_start_make_serve_fail(tmp_path: Path) -> None:
    """A worker's lifespan fails (its memory database cannot be opened): exit 1, not 0.

    The parent's migration passes (storage is another SQLite file); each worker then fails to
    open memory (its folder is a file), and uvicorn stops the supervisor as after a clean stop.
    """
    (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
    config = _config(
        tmp_path,
        storage={"url": f"sqlite:///{tmp_path / 'gw.db'}"},
        memory={"enabled": True, "url": f"sqlite:///{tmp_path / 'not-a-folder' / 'm.db'}"},
    )
    command = [sys.executable, "-m", "foldwise.cli", "serve", "--config", config]
    command += ["--workers", "2", "--port", str(free_port())]
    done = subprocess.run(
        command, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "worker processes could not start" in done.stderr
