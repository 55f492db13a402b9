"""`foldwise memory …` on a real SQLite file, and the `memory:` config block."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from foldwise.cli import app
from foldwise.config import FoldwiseConfig, load_config


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "foldwise.yaml"
    path.write_text(f"storage:\n  url: sqlite:///{tmp_path / 'fw.db'}\n", "utf-8")
    return path


def run(config: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["memory", *args, "--config", str(config)], input=stdin
    )
    return result.exit_code, result.stdout, result.stderr


def test_add_search_history_export_import_and_forget(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert run(cfg, "add", "I live in Berlin", "--user", "alice")[0] == 0
    code, out, _ = run(cfg, "add", "我搬到北京了", "--user", "alice", "--json")
    assert code == 0
    new_id = json.loads(out)[0]["id"]
    code, out, _ = run(cfg, "search", "北京", "--user", "alice")
    assert code == 0 and new_id in out
    assert "no facts" in run(cfg, "search", "北京", "--user", "bob")[1]
    code, out, _ = run(cfg, "history", new_id, "--user", "alice", "--json")
    assert [f["status"] for f in json.loads(out)] == ["superseded", "active"]
    code, exported, _ = run(cfg, "export", "--user", "alice")
    assert code == 0 and len(exported.splitlines()) == 2
    code, out, _ = run(cfg, "import", "-", "--user", "carol", stdin=exported)
    assert code == 0 and "imported 2" in out
    assert new_id in run(cfg, "list", "--user", "carol")[1]
    code, out, _ = run(cfg, "forget", new_id, "--user", "alice")
    assert code == 0 and "forgot 2" in out
    assert "no facts" in run(cfg, "list", "--user", "alice")[1]


def test_bad_input_exits_2_and_names_what_is_wrong(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    code, _, err = run(cfg, "add", "x", "--user", "a/b")
    assert code == 2 and "namespace[1]" in err
    code, _, err = run(cfg, "list", "--user", "alice", "--status", "gone")
    assert code == 2 and "status" in err
    (tmp_path / "bad.jsonl").write_text('{"id": "fact_1"}\nnot json\n', "utf-8")
    code, _, err = run(cfg, "import", str(tmp_path / "bad.jsonl"))
    assert code == 2 and "line 1" in err
    code, _, err = run(cfg, "import", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no such file" in err
    code, _, err = run(cfg, "forget", "fact_nope", "--user", "alice")
    assert code == 1 and "not found" in err


def test_deerflows_memory_block_loads_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "foldwise.yaml"
    path.write_text(
        "memory:\n  enabled: true\n  injection_enabled: false\n  max_injection_tokens: 800\n"
        "  debounce_seconds: 10\n  max_facts: 200\n  fact_confidence_threshold: 0.7\n"
        "  storage_path: memory.json\n  strict_user_scope: true\n",
        "utf-8",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        memory = load_config(path).memory
    assert memory.injection.enabled is False and memory.injection.max_tokens == 800
    assert memory.retention.max_active_facts == 200 and memory.min_confidence == 0.7
    messages = [str(w.message) for w in caught]
    assert (
        len(messages) == 1 and "storage_path" in messages[0] and "strict_user_scope" in messages[0]
    )


def test_memory_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="mode"):
        FoldwiseConfig.model_validate({"memory": {"mode": "passive"}})
    with pytest.raises(ValueError, match="agent"):
        FoldwiseConfig.model_validate({"memory": {"agent": "a/b"}})
    with pytest.raises(ValueError, match="embedder"):
        FoldwiseConfig.model_validate({"memory": {"embedder": "not-a-path"}})
