"""`foldwise serve --workers N` refuses a database the workers could not share."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from foldwise.cli import app

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
