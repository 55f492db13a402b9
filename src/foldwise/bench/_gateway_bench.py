"""`foldwise bench gateway`: foldwise's gateway next to LangGraph's own server, one run.

The columns, against the same OpenAI-compatible stub (one child process, ~1 ms per call)
with the official `langgraph_sdk` client: LangGraph's in-memory server as shipped
(``langgraph dev``, measured alone first), then side by side, taking turns request by request
(`foldwise.bench._gateway_measure.ameasure`): the same with its queue's idle poll shortened
to 5 ms (a patch in its child process only, see `foldwise.bench._gateway_lg_child`),
`foldwise serve` on SQLite and, with a URL, on PostgreSQL. Ratios are foldwise /
LangGraph-5ms from the same run, and each foldwise column is checked against the targets of
issue 16. When LangGraph cannot run, its columns say why and nothing is invented.
"""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from foldwise.bench._gateway_measure import CONCURRENT_BLOCKS, ColumnResult, Sizes, measure
from foldwise.bench._gateway_render import render_markdown
from foldwise.bench._gateway_targets import (
    Target,
    foldwise_target,
    langgraph_target,
    langgraph_unavailable,
    langgraph_versions,
)
from foldwise.bench._rel_load_serve import fresh_postgres
from foldwise.bench._reliability import write_marked
from foldwise.bench._serve import stub_process

__all__ = [
    "FULL_SIZES",
    "POLL_SECONDS",
    "QUICK_SIZES",
    "GatewayBenchReport",
    "run_gateway_benchmark",
    "write_gateway_report",
]

FULL_SIZES = Sizes(
    sequential=500, warmup=10, turns=200, window=20, clients=16, seconds=30, streams=50, threads=3
)
QUICK_SIZES = Sizes(sequential=5, warmup=1, turns=6, window=3, clients=2, seconds=2, streams=3)
SHIPPED_CAP = {"full": (30, 10), "quick": (2, 1)}
"""LangGraph as shipped waits its 0.5 s poll per run: fewer sequential pairs and streams."""
POLL_SECONDS = 0.005
SHIPPED, FAST, SQLITE, POSTGRES = (
    "LangGraph as shipped",
    "LangGraph, poll 5 ms",
    "foldwise (SQLite)",
    "foldwise (PostgreSQL)",
)


@dataclass
class GatewayBenchReport:
    """The columns, the reasons for missing ones, and what the run was."""

    columns: list[ColumnResult]
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, Any] = field(default_factory=dict)
    load_average: dict[str, list[float]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def column(self, label: str) -> ColumnResult | None:
        """The column called `label`, if it was measured."""
        return next((c for c in self.columns if c.label == label), None)

    @property
    def passed(self) -> bool:
        """Whether every measured foldwise column met every target it could be checked on."""
        from foldwise.bench._gateway_render import checks

        return all(ok is not False for _, _, ok in checks(self))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        from foldwise.bench._gateway_render import checks, ratios

        return {
            "columns": [c.to_dict() for c in self.columns],
            "unavailable": self.unavailable,
            "ratios_foldwise_over_langgraph_5ms": ratios(self),
            "targets": [
                {"check": name, "value": value, "passed": ok} for name, value, ok in checks(self)
            ],
            "passed": self.passed,
            "notes": self.notes,
            "sizes": self.sizes,
            "load_average": self.load_average,
            "versions": self.versions,
        }

    def to_markdown(self) -> str:
        """The table, the checks and the notes."""
        return render_markdown(self)


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _columns(
    report: GatewayBenchReport,
    starts: Sequence[tuple[str, Callable[[], AbstractContextManager[Target]]]],
    sizes: Sizes,
) -> None:
    """Start every server in `starts`, measure them side by side, stop them."""
    labels = " + ".join(label for label, _ in starts)
    with contextlib.ExitStack() as stack:
        targets = [stack.enter_context(start()) for _, start in starts]
        report.load_average[f"{labels}: before"] = _load()
        report.columns.extend(measure(targets, sizes))
        report.load_average[f"{labels}: after"] = _load()


@contextlib.contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="foldwise-bench-gateway-") as tmp:
        yield Path(tmp)


def run_gateway_benchmark(
    *,
    quick: bool = False,
    postgres_url: str | None = None,
    langgraph: bool = True,
    workdir: Path | None = None,
) -> GatewayBenchReport:
    """Measure every column in turn and return the report.

    Args:
        quick: Small counts (for tests): 5 sequential pairs, 6 turns, 2 clients x 2 s.
        postgres_url: Also measure foldwise on this PostgreSQL database (a fresh schema,
            dropped afterwards).
        langgraph: Measure LangGraph's columns (False: foldwise alone, said in the report).
        workdir: Keep the servers' folders and logs here (default: a temporary folder).
    """
    sizes = QUICK_SIZES if quick else FULL_SIZES
    cap = SHIPPED_CAP["quick" if quick else "full"]
    report = GatewayBenchReport([], sizes=dict(vars(sizes)), versions=langgraph_versions())
    report.versions["python"] = platform.python_version()
    reason = langgraph_unavailable() if langgraph else "not requested (--no-langgraph)"
    with _workdir(workdir) as root, stub_process() as stub, contextlib.ExitStack() as stack:
        side_by_side: list[tuple[str, Callable[[], AbstractContextManager[Target]]]] = []
        if reason is None:
            shipped = partial(langgraph_target, SHIPPED, root / "lg", stub.url)
            _columns(report, [(SHIPPED, shipped)], sizes.capped(*cap))
            fast = partial(langgraph_target, FAST, root / "lg5", stub.url, poll=POLL_SECONDS)
            side_by_side.append((FAST, fast))
            report.notes.append(
                f"{SHIPPED}: measured alone first, {cap[0]} sequential pairs and {cap[1]} streams "
                "at most (each run waits for the queue's 0.5 s idle poll). "
                f"{FAST}: langgraph_runtime_inmem.ops.Runs.next recompiled in the child process "
                "with asyncio.sleep(0.005) in place of its hard-coded asyncio.sleep(0.5) (no env "
                "var or langgraph.json key sets it)."
            )
        else:
            report.unavailable = {SHIPPED: reason, FAST: reason}
        sqlite_url = f"sqlite:///{root / 'fw' / 'foldwise.db'}"
        side_by_side.append(
            (SQLITE, partial(foldwise_target, SQLITE, root / "fw", stub.url, sqlite_url))
        )
        if postgres_url:
            url = stack.enter_context(fresh_postgres(postgres_url))
            pg = partial(foldwise_target, POSTGRES, root / "fwpg", stub.url, url)
            side_by_side.append((POSTGRES, pg))
        _columns(report, side_by_side, sizes)
        if len(side_by_side) > 1:
            block = sizes.seconds / CONCURRENT_BLOCKS
            report.notes.append(
                f"{' + '.join(label for label, _ in side_by_side)}: running together, measured "
                "side by side: they take turns request by request (turn by turn, stream by "
                f"stream; the order reversed every other round), the {sizes.clients} clients in "
                f"{CONCURRENT_BLOCKS} alternating blocks of {block:.3g} "
                "s each. An idle server meanwhile costs the other little (LangGraph's 5 ms poll "
                "wakes it 200 times a second)."
            )
    return report


BEGIN_MARK = "<!-- bench-gateway:begin (generated by foldwise bench gateway --write) -->"
END_MARK = "<!-- bench-gateway:end -->"


def write_gateway_report(path: Path, report: GatewayBenchReport) -> None:
    """Replace the generated section of `path` (between the markers) with `report`."""
    write_marked(path, report.to_markdown(), begin=BEGIN_MARK, end=END_MARK)
