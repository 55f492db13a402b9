"""The README's library example runs offline and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_library_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- readme-example.*?-->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its library example"
    code = match.group(1)
    assert len(code.strip().splitlines()) <= 15
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    printed = out.getvalue()
    assert "messages >= 5: measured 5 messages" in printed
    assert "## Session intent" in printed
    assert "Refactor src/billing.py; never change the public API." in printed


def test_quick_start_has_exactly_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]
