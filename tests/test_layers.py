"""The import-linter contracts in pyproject.toml hold, and a layer leak breaks them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# One leak per contract: (module written into a copy of the package, its source, the contract
# name it breaks, as pyproject.toml spells it).
LEAKS = [
    (
        "tokens/_leak.py",
        "from foldwise.middleware import SummarizationMiddleware\n",
        "Core packages never import the adapters, entry points or benchmarks",
    ),
    (
        "compaction/_leak.py",
        "import foldwise.testing\n",
        "Only tests import foldwise.testing",
    ),
    (
        "middleware/_leak.py",
        "import foldwise.gateway\n",
        "Middleware never imports the gateway, replay, benchmarks or CLI",
    ),
    (
        "gateway/_leak.py",
        "import foldwise.cli\n",
        "The gateway never imports the CLI, replay or benchmarks",
    ),
    (
        "replay/_leak.py",
        "def lazy() -> None:\n    import foldwise.bench\n",
        "Replay never imports the benchmarks or the CLI (bench uses replay)",
    ),
    (
        "bench/_leak.py",
        "from foldwise.cli import main\n",
        "Benchmarks never import the CLI",
    ),
    (
        "summarizers/_leak.py",
        "import rich\n",
        "Web, CLI and terminal frameworks stay out of the core and middleware",
    ),
]


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """Run `lint-imports` on `project` (a directory with pyproject.toml and src/foldwise)."""
    if not LINT_IMPORTS.exists():
        pytest.skip("lint-imports is not installed (dev dependency group)")
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "COLUMNS": "200"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def verdicts(output: str) -> dict[str, str]:
    """Contract name -> KEPT/BROKEN, from the summary `lint-imports` prints."""
    return dict(re.findall(r"^(.+?) (KEPT|BROKEN)\b", output, flags=re.MULTILINE))


def test_contracts_hold_on_the_source_tree() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert set(found) == {name for _, _, name in LEAKS}
    assert set(found.values()) == {"KEPT"}


def test_each_layer_leak_breaks_its_contract(tmp_path: Path) -> None:
    # A copy of the package, so src/ is never modified; PYTHONPATH makes it shadow the
    # editable install.
    shutil.copytree(
        ROOT / "src" / "foldwise",
        tmp_path / "src" / "foldwise",
        ignore=shutil.ignore_patterns("__pycache__", "corpus"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for relative, source, _ in LEAKS:
        (tmp_path / "src" / "foldwise" / relative).write_text(
            f'"""A deliberate layer leak."""\n\n{source}', encoding="utf-8"
        )

    result = lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert {name: found.get(name) for _, _, name in LEAKS} == {
        name: "BROKEN" for _, _, name in LEAKS
    }
    for relative, _, _ in LEAKS:
        module = "foldwise." + relative.removesuffix(".py").replace("/", ".")
        assert module in result.stdout
