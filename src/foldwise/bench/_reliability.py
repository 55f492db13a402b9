"""`foldwise bench reliability`: the standing reliability and security campaign, one table.

Each area (crash points, faults of the world, load, fuzzing, injection, isolation) lives in its
own module with a `run(options) -> list[AreaResult]` entry point, registered in `AREAS` by
dotted path (imported only when run). An area tries cases against the real stack, checks the
invariants after each (I1–I6, docs/reliability.md), and returns one row per table line: cases
tried, violations found (each named), the worst finding, the wall time and the command that
reruns the row. `run_reliability` runs the areas asked for and `ReliabilityReport.to_markdown`
renders docs/reliability.md with the machine and the versions it ran on.

The short form (`full=False`) is what `make test` runs through `tests/reliability/`; the full
form is `foldwise bench reliability`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "AREAS",
    "AreaOptions",
    "AreaResult",
    "Finding",
    "ReliabilityReport",
    "area_command",
    "run_reliability",
    "write_between_marks",
    "write_report",
]


@dataclass(frozen=True)
class Finding:
    """One violation: which case, which invariant, what was seen.

    Attributes:
        case: The case that found it (a seed, a point name, a payload id, a route).
        invariant: The invariant or expectation broken (`I1`..`I6`, `no-5xx`, ...).
        detail: What was observed, in one or two lines.
    """

    case: str
    invariant: str
    detail: str

    def line(self) -> str:
        """`invariant case: detail` on one line."""
        return f"{self.invariant} {self.case}: {self.detail}"


@dataclass
class AreaResult:
    """One row of the reliability table.

    Attributes:
        area: The row's name (`crash points, SQLite`, `fuzzing`, ...).
        cases: How many cases were tried.
        violations: Every violation found (an empty list when none).
        command: The command that reruns exactly this row.
        seconds: Wall time of the row.
        notes: Figures worth printing next to the row (p50/p99, RSS, counts by kind).
    """

    area: str
    cases: int
    violations: list[Finding]
    command: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def worst(self) -> str:
        """The first violation's line, or `none`."""
        return self.violations[0].line() if self.violations else "none"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "area": self.area,
            "cases": self.cases,
            "violations": [vars(v) for v in self.violations],
            "worst": self.worst,
            "command": self.command,
            "seconds": round(self.seconds, 2),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class AreaOptions:
    """How an area runs.

    Attributes:
        full: The full campaign (`foldwise bench reliability`) or the short form (`make test`).
        workdir: A private directory the area may fill (databases, artifact roots, logs).
        seed: Seed of every random choice, printed in the commands that rerun a row.
        postgres_url: A PostgreSQL database for the areas that use one, or `None` to skip them.
    """

    full: bool
    workdir: Path
    seed: int = 0
    postgres_url: str | None = None


AreaRun = Callable[[AreaOptions], list[AreaResult]]

AREAS: dict[str, str] = {
    "crash": "foldwise.bench._rel_crash:run",
    "faults": "foldwise.bench._rel_faults:run",
    "load": "foldwise.bench._rel_load:run",
    "fuzz": "foldwise.bench._rel_fuzz:run",
    "injection": "foldwise.bench._rel_injection:run",
    "isolation": "foldwise.bench._rel_isolation:run",
}
"""Area name -> `module:function`, in the order the table lists them."""


def area_command(area: str, options: AreaOptions, *extra: str) -> str:
    """The command that reruns `area` as `options` ran it (plus `extra` arguments)."""
    parts = ["foldwise bench reliability", f"--area {area}", f"--seed {options.seed}"]
    if not options.full:
        parts.append("--short")
    return " ".join([*parts, *extra])


def _load(area: str) -> AreaRun:
    if area not in AREAS:
        known = ", ".join(AREAS)
        raise ValueError(f"unknown reliability area {area!r} (known: {known})")
    module, _, name = AREAS[area].partition(":")
    run: AreaRun = getattr(importlib.import_module(module), name)
    return run


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment() -> dict[str, str]:
    """The machine and the versions a report ran on."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        **{
            name: _version(name)
            for name in ("foldwise", "langgraph", "langchain", "langchain-core", "fastapi")
        },
    }


@dataclass
class ReliabilityReport:
    """Every row run, with where and how.

    Attributes:
        rows: The areas' rows in `AREAS` order.
        full: Whether the full campaign ran.
        seed: The seed every area used.
        env: `environment()` at the start.
        seconds: Wall time of the whole run.
    """

    rows: list[AreaResult]
    full: bool
    seed: int
    env: dict[str, str]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """No row found a violation."""
        return all(not row.violations for row in self.rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "full": self.full,
            "seed": self.seed,
            "env": self.env,
            "seconds": round(self.seconds, 1),
            "passed": self.passed,
            "rows": [row.to_dict() for row in self.rows],
        }

    def to_markdown(self) -> str:
        """docs/reliability.md's generated part: the environment, the table, the violations."""
        form = "full campaign" if self.full else "short form (as `make test` runs it)"
        env = ", ".join(f"{k} {v}" for k, v in self.env.items() if k not in ("date", "machine"))
        lines = [
            f"Generated by `foldwise bench reliability{'' if self.full else ' --short'}` "
            f"(seed {self.seed}, {form}) on {self.env.get('date')}: {self.env.get('machine')}; "
            f"{env}. Wall time {self.seconds:.0f} s.",
            "",
            "| area | cases | violations | worst finding | seconds | rerun |",
            "| --- | ---: | ---: | --- | ---: | --- |",
        ]
        for row in self.rows:
            worst = row.worst.replace("|", "\\|")
            lines.append(
                f"| {row.area} | {row.cases:,} | {len(row.violations)} | {worst} "
                f"| {row.seconds:.0f} | `{row.command}` |"
            )
        noted = [row for row in self.rows if row.notes]
        if noted:
            lines += ["", "Figures measured in the same run:", ""]
            for row in noted:
                lines += [f"- **{row.area}**: " + "; ".join(row.notes)]
        found = [(row, v) for row in self.rows for v in row.violations]
        if found:
            lines += ["", "Violations:", ""]
            lines += [f"- {row.area}: {v.line()}" for row, v in found]
        return "\n".join(lines) + "\n"


def run_reliability(
    areas: Sequence[str] | None = None,
    *,
    full: bool = True,
    seed: int = 0,
    postgres_url: str | None = None,
    workdir: Path | None = None,
) -> ReliabilityReport:
    """Run the `areas` (default: all, in `AREAS` order) and collect their rows.

    Raises:
        ValueError: An unknown area name.
    """
    names = list(areas or AREAS)
    runs = [(name, _load(name)) for name in names]  # unknown names fail before anything runs
    started = time.perf_counter()
    env = environment()
    rows: list[AreaResult] = []
    with tempfile.TemporaryDirectory(prefix="foldwise-reliability-") as scratch:
        root = workdir or Path(scratch)
        for name, run in runs:
            area_dir = root / name
            area_dir.mkdir(parents=True, exist_ok=True)
            options = AreaOptions(full=full, workdir=area_dir, seed=seed, postgres_url=postgres_url)
            rows += run(options)
    return ReliabilityReport(
        rows=rows, full=full, seed=seed, env=env, seconds=time.perf_counter() - started
    )


BEGIN_MARK = "<!-- reliability:begin (generated by foldwise bench reliability) -->"
END_MARK = "<!-- reliability:end -->"


def write_report(path: Path, report: ReliabilityReport) -> None:
    """Replace the generated part of `path` (between the markers) with `report`'s table.

    A file without the markers gets them appended, so the hand-written text around the table
    (the invariants, how to read a row) is kept.
    """
    write_between_marks(path, BEGIN_MARK, END_MARK, report.to_markdown())


def write_between_marks(path: Path, begin: str, end: str, markdown: str) -> None:
    """Replace what lies between the `begin` and `end` lines of `path` with `markdown`.

    A file without the markers gets them appended with `markdown` between them.
    """
    text = path.read_text("utf-8") if path.exists() else ""
    block = f"{begin}\n{markdown}{end}"
    start, stop = text.find(begin), text.find(end)
    if start >= 0 and stop > start:
        text = text[:start] + block + text[stop + len(end) :]
    else:
        text = f"{text.rstrip()}\n\n{block}\n" if text else f"{block}\n"
    path.write_text(text, "utf-8")
