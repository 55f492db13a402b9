"""No function in src/foldwise is longer than 80 lines, no module longer than 500 (CONVENTIONS)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LIMIT = 80

MODULE_LIMIT = 500

# Known offenders, {qualified name: current length in lines}: none left. A function may only be
# listed here with a reason, and may shrink but not grow.
ALLOWED: dict[str, int] = {}


def function_lengths(root: Path) -> dict[str, int]:
    """`module:Class.function` -> lines (decorators excluded) of every function under `root`."""
    lengths: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lengths[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), module + ":")
    return lengths


def oversized(lengths: dict[str, int], allowed: dict[str, int]) -> list[str]:
    """Functions over `LIMIT` lines that are not allowed, or longer than their allowance."""
    return [
        f"{name}: {length} lines (limit {allowed.get(name, LIMIT)})"
        for name, length in sorted(lengths.items())
        if length > max(LIMIT, allowed.get(name, LIMIT))
    ]


def test_no_function_over_the_limit() -> None:
    assert oversized(function_lengths(SRC / "foldwise"), ALLOWED) == []


def test_no_module_over_the_limit() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted((SRC / "foldwise").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LIMIT
    }
    assert long == {}


def test_allow_list_names_existing_functions() -> None:
    # A split or renamed function must leave the list, so it cannot shelter a newcomer.
    lengths = function_lengths(SRC / "foldwise")
    assert [name for name in ALLOWED if name not in lengths] == []


def test_the_check_catches_a_long_function_and_a_grown_one(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    (package / "mod.py").write_text(
        f"def long():\n{body}\n\nclass C:\n    def short(self):\n        return 1\n",
        encoding="utf-8",
    )
    lengths = function_lengths(package)
    assert lengths == {"pkg.mod:long": LIMIT + 1, "pkg.mod:C.short": 2}
    assert oversized(lengths, {}) == ["pkg.mod:long: 81 lines (limit 80)"]
    assert oversized(lengths, {"pkg.mod:long": LIMIT + 1}) == []
    assert oversized(lengths, {"pkg.mod:long": LIMIT + 1, "pkg.mod:C.short": 2}) == []
    grown = {**lengths, "pkg.mod:long": LIMIT + 5}
    assert oversized(grown, {"pkg.mod:long": LIMIT + 1}) == ["pkg.mod:long: 85 lines (limit 81)"]
