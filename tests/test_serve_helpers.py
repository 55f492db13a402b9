"""`foldwise.bench._serve`: the child environment, a server that cannot start, a clean stop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from foldwise.bench._serve import (
    ServerStartError,
    child_env,
    serving,
    start_serve,
    stub_model_entry,
    write_config,
)


def test_child_env_hides_keys_and_settings_but_keeps_what_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("FOLDWISE_CONFIG", "/elsewhere.yaml")
    monkeypatch.setenv("PYTHONPATH", "/already")
    env = child_env({"FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT": "/tmp/m"}, pythonpath=["/repo"])
    assert "OPENAI_API_KEY" not in env and "FOLDWISE_CONFIG" not in env
    assert env["FOLDWISE_TEST_PAUSE_AFTER_CHECKPOINT"] == "/tmp/m"
    assert env["PYTHONPATH"] == os.pathsep.join(["/repo", "/already"])
    assert env["LANGSMITH_TRACING"] == "false" and env["PYTHONUNBUFFERED"] == "1"


def test_stub_model_entry_and_write_config(tmp_path: Path) -> None:
    entry = stub_model_entry("http://127.0.0.1:9", context_window=6000, stream_usage=True)
    assert entry["base_url"] == "http://127.0.0.1:9/v1" and entry["context_window"] == 6000
    path = write_config(tmp_path / "a" / "b", {"models": [entry]})
    assert yaml.safe_load(path.read_text())["models"][0]["use"] == "langchain_openai:ChatOpenAI"


def test_a_server_that_cannot_start_raises_with_its_log(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "models": [{"name": "m", "use": "foldwise.testing:ScriptedChatModel"}],
            "storage": {"url": "sqlite:////proc/no-such-dir/db.sqlite"},
        },
    )
    with pytest.raises(ServerStartError, match="exited early") as raised:
        start_serve(config, tmp_path, timeout=60)
    assert "the gateway could not start" in str(raised.value)


def test_serving_stops_the_server_cleanly(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "models": [{"name": "m", "use": "foldwise.testing:ScriptedChatModel"}],
            "storage": {"url": "sqlite:///data/foldwise.db"},
        },
    )
    with serving(config, tmp_path) as server:
        assert server.returncode is None
        assert server.url.startswith("http://127.0.0.1:")
    assert server.returncode == 0  # SIGTERM is a clean stop
    assert "Traceback" not in server.log_text()
